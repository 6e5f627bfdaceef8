//! Fuzz the memcached UDP reassembler: the input is cut into datagrams (a length byte
//! before each); no sequence of datagrams may panic it or grow it past its bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::memcache::udp::UdpReassembler;

fuzz_target!(|data: &[u8]| {
    let mut r = UdpReassembler::new(4, 4096);
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (d, next) = tail.split_at(n);
        if let Ok(Some((_, whole))) = r.push(d) {
            assert!(whole.len() <= 4096 + 255);
        }
        assert!(r.pending() <= 4);
        assert!(r.buffered_bytes() <= 4096);
        rest = next;
    }
});
