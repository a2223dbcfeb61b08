//! A one-value channel whose receiver is a future: how a wgpu callback (buffer mapping)
//! hands its result to async code without blocking (the browser cannot block).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct State<T> {
    value: Option<T>,
    /// The sender was dropped (with or without sending).
    closed: bool,
    waker: Option<Waker>,
}

pub struct Sender<T>(Arc<Mutex<State<T>>>);

/// Resolves to the sent value, or `None` when the sender is dropped without sending.
pub struct Receiver<T>(Arc<Mutex<State<T>>>);

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let state = Arc::new(Mutex::new(State {
        value: None,
        closed: false,
        waker: None,
    }));
    (Sender(state.clone()), Receiver(state))
}

impl<T> Sender<T> {
    pub fn send(self, value: T) {
        if let Ok(mut s) = self.0.lock() {
            s.value = Some(value);
        }
        // Drop wakes the receiver.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.0.lock() {
            s.closed = true;
            if let Some(w) = s.waker.take() {
                w.wake();
            }
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let Ok(mut s) = self.0.lock() else {
            return Poll::Ready(None);
        };
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.closed {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_value_arrives_and_a_dropped_sender_resolves_to_none() {
        let (tx, rx) = channel();
        tx.send(7);
        assert_eq!(pollster::block_on(rx), Some(7));
        let (tx, rx) = channel::<u8>();
        drop(tx);
        assert_eq!(pollster::block_on(rx), None);
    }
}
