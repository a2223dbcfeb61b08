//! Buffer helpers: create storage/uniform buffers, upload, read back.

use super::device::GpuContext;
use crate::error::{Error, Result};
use wgpu::util::DeviceExt;

/// Usage of every compute buffer: kernels read and write them (GEMVs on CPU adapters read
/// their input vector as a uniform), uploads and readbacks copy.
const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::UNIFORM)
    .union(wgpu::BufferUsages::COPY_DST)
    .union(wgpu::BufferUsages::COPY_SRC);

/// Round a byte size up to a multiple of 4 and at least 16 (bindings of runtime-sized
/// arrays must not be empty; copies move whole words).
pub fn padded(bytes: u64) -> u64 {
    bytes.max(16).div_ceil(4) * 4
}

impl GpuContext {
    /// Bytes of all buffers created so far (what the memory planner predicts).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count(&self, bytes: u64) {
        self.allocated
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// A zero-filled storage buffer of `bytes` (checked against the device limits).
    pub fn storage(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
        self.check_binding(label, padded(bytes))?;
        self.storage_in_parts(label, bytes)
    }

    /// A storage buffer of `bytes` that is bound in parts of at most the binding limit
    /// (a vocabulary table: [`crate::gpu::weights::MatrixBuffers::parts`]), so only the
    /// buffer limit applies.
    pub fn storage_in_parts(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer> {
        let size = padded(bytes);
        if size > self.limits.max_buffer_size {
            return Err(Error::ExceedsDeviceLimits {
                what: label.into(),
                limit: "max_buffer_size",
                needed: size,
                available: self.limits.max_buffer_size,
            });
        }
        self.count(size);
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: STORAGE,
            mapped_at_creation: false,
        }))
    }

    /// A storage buffer holding `data` (little-endian words).
    pub fn storage_init<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.len() as u64 != padded(bytes.len() as u64) {
            let buf = self.storage(label, bytes.len() as u64)?;
            self.queue.write_buffer(&buf, 0, bytes);
            return Ok(buf);
        }
        self.check_binding(label, bytes.len() as u64)?;
        self.count(bytes.len() as u64);
        Ok(self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytes,
                usage: STORAGE,
            }))
    }

    /// A uniform buffer of `bytes` that the host rewrites (e.g. the step parameters).
    pub fn uniform(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.count(padded(bytes));
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded(bytes),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A host-readable staging buffer for readbacks.
    pub fn staging(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.count(padded(bytes));
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: padded(bytes),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Map a staging buffer (whose copy was already submitted), wait, and return its first
    /// `bytes` bytes. Native only: blocks on the device.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_staging(&self, staging: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        self.read_staging_when(staging, bytes, None)
    }

    /// [`GpuContext::read_staging`] of a copy in submission `index`, waiting for that
    /// submission only (later ones keep running: pipelined decode).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_staging_after(
        &self,
        staging: &wgpu::Buffer,
        bytes: u64,
        index: wgpu::SubmissionIndex,
    ) -> Result<Vec<u8>> {
        self.read_staging_when(staging, bytes, Some(index))
    }

    /// Block until submission `index` is done.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_for(&self, index: wgpu::SubmissionIndex) -> Result<()> {
        self.poll_until(Some(index))?;
        self.check_errors()
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn poll_until(&self, index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        let wait = wgpu::PollType::Wait {
            submission_index: index,
            timeout: None,
        };
        self.device
            .poll(wait)
            .map(drop)
            .map_err(|e| self.poll_failed(e))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn read_staging_when(
        &self,
        staging: &wgpu::Buffer,
        bytes: u64,
        index: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u8>> {
        let size = padded(bytes);
        let slice = staging.slice(..size);
        let (tx, rx) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.poll_until(index)?;
        rx.recv()
            .map_err(|_| self.map_failed("its callback never ran"))?
            .map_err(|e| self.map_failed(e))?;
        let out = take_mapped(staging, slice, bytes)?;
        self.check_errors()?;
        Ok(out)
    }

    /// [`GpuContext::read_staging`] that waits without blocking: on wasm the browser maps
    /// the buffer while this future is pending; natively the device is polled first, so the
    /// future is ready at once.
    pub async fn read_staging_async(&self, staging: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        let size = padded(bytes);
        let slice = staging.slice(..size);
        let (tx, rx) = super::oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| tx.send(r));
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| self.poll_failed(e))?;
        rx.await
            .ok_or_else(|| self.map_failed("its callback never ran"))?
            .map_err(|e| self.map_failed(e))?;
        let out = take_mapped(staging, slice, bytes)?;
        // An error the device reported meanwhile is this call's (in a browser, decode
        // steps check nowhere else).
        self.check_errors()?;
        Ok(out)
    }

    /// Copy `bytes` from the start of `src` to the host (one submit; for tests and debugging).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_buffer(&self, src: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        let staging = self.staging("readback", bytes);
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, &staging, 0, padded(bytes));
        self.queue.submit([enc.finish()]);
        self.read_staging(&staging, bytes)
    }

    /// `read_buffer` as f32 values.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_f32(&self, src: &wgpu::Buffer, len: usize) -> Result<Vec<f32>> {
        let bytes = self.read_buffer(src, 4 * len as u64)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// `read_buffer` as u32 values.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_u32(&self, src: &wgpu::Buffer, len: usize) -> Result<Vec<u32>> {
        let bytes = self.read_buffer(src, 4 * len as u64)?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

/// Copy the first `bytes` of a mapped staging buffer out and unmap it.
fn take_mapped(
    staging: &wgpu::Buffer,
    slice: wgpu::BufferSlice<'_>,
    bytes: u64,
) -> Result<Vec<u8>> {
    let out = {
        let view = slice
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("reading a mapped buffer: {e}")))?;
        view[..bytes as usize].to_vec()
    };
    staging.unmap();
    Ok(out)
}
