//! The session snapshot reader (`pocketrt::session`): any bytes parse to a typed error or
//! to a history whose rows cover every position once, in order, each span as long as its
//! layout says; a restore's checks then run against a fixed session header.

use pocketrt::session::{Compat, Header, Snapshot};

pub fn run(data: &[u8]) {
    let Ok(s) = Snapshot::parse(data.to_vec(), "fuzz") else {
        return;
    };
    let per = s.header.layout.bytes_per_position();
    let mut next = 0;
    for (start, count, rows) in s.rows() {
        assert_eq!(start, next, "rows out of order");
        assert_eq!(rows.len(), count * per, "rows of {count} positions");
        next = start + count;
    }
    assert_eq!(next, s.tokens.len(), "rows cover the history");
    let ours = Header {
        backend: "cpu/int8".into(),
        ..s.header.clone()
    };
    let _ = Compat::check(&s, &ours, 4096, "fuzz");
}
