//! The kernel's records, as user space sees them: [`Event`], parsed from the ring buffer's
//! bytes (`struct event` in `bpf/stages.bpf.c`, 80 bytes, native endian).

/// Size of one ring-buffer record.
pub const RAW_EVENT_LEN: usize = 80;

/// Transport of the socket an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Tcp,
    Udp,
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Data reached a server socket.
    Arrival,
    /// A server thread's read-class system call returned bytes from a socket.
    Read,
    /// A server thread's write-class system call sent bytes on a socket.
    Write,
}

/// One kernel event. Times are absolute CLOCK_MONOTONIC ns (`bpf_ktime_get_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: Kind,
    pub proto: Proto,
    /// Arrival: when the socket was told of the data. Read/write: the system call's return.
    pub ts: u64,
    /// Read/write: the system call's entry.
    pub enter: u64,
    /// The socket, as an identity only.
    pub sk: u64,
    /// Read: the thread's last return from epoll_wait (0: none seen).
    pub epoll: u64,
    /// Read: the thread's last sched_wakeup and last switch onto a CPU (0: none seen).
    pub wakeup: u64,
    pub oncpu: u64,
    /// Write: when its last packet was handed to the device (0: not seen in the call).
    pub tx: u64,
    /// Arrival: the queued packet's kernel receive stamp (`skb->tstamp`, taken at the
    /// stack's entry), as the kernel keeps it: CLOCK_REALTIME ns; 0 when the packet carried
    /// none (no socket on the host asked for receive timestamps).
    pub rx_realtime: u64,
    /// Arrival: [`Event::rx_realtime`] on CLOCK_MONOTONIC ([`Event::map_rx`]; the
    /// [`Collector`](crate::Collector) maps every arrival it drains); 0: not known.
    pub rx: u64,
    pub tid: u32,
    /// TCP sequence number after the event: rcv_nxt (arrival), copied_seq (read),
    /// write_seq (write).
    pub seq: u32,
    pub bytes: u32,
    /// The server's port and the client's (the connection's, or a datagram's).
    pub lport: u16,
    pub rport: u16,
    /// UDP arrival, read and write: the payload's first two bytes (memcached's frame
    /// request id).
    pub rid: u16,
}

impl Event {
    /// Sets [`Event::rx`] from [`Event::rx_realtime`] with `realtime_minus_mono_ns`, the
    /// offset of CLOCK_REALTIME over CLOCK_MONOTONIC (0 stays 0: no stamp).
    pub fn map_rx(&mut self, realtime_minus_mono_ns: i64) {
        self.rx = if self.rx_realtime == 0 {
            0
        } else {
            let m = (self.rx_realtime as i64).wrapping_sub(realtime_minus_mono_ns);
            m.max(0) as u64
        };
    }

    /// Parses one ring-buffer record; None for a short or unknown one.
    pub fn parse(b: &[u8]) -> Option<Event> {
        if b.len() < RAW_EVENT_LEN {
            return None;
        }
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        let u32_at = |o: usize| {
            let mut a = [0u8; 4];
            a.copy_from_slice(&b[o..o + 4]);
            u32::from_ne_bytes(a)
        };
        let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        let kind = match b[74] {
            1 => Kind::Arrival,
            2 => Kind::Read,
            3 => Kind::Write,
            _ => return None,
        };
        let proto = match b[75] {
            6 => Proto::Tcp,
            17 => Proto::Udp,
            _ => return None,
        };
        // The kernel's `epoll` slot carries a write's transmit time.
        let (epoll, tx) = match kind {
            Kind::Write => (0, u64_at(24)),
            _ => (u64_at(24), 0),
        };
        Some(Event {
            kind,
            proto,
            ts: u64_at(0),
            enter: u64_at(8),
            sk: u64_at(16),
            epoll,
            wakeup: u64_at(32),
            oncpu: u64_at(40),
            tx,
            rx_realtime: u64_at(48),
            rx: 0,
            tid: u32_at(56),
            seq: u32_at(60),
            bytes: u32_at(64),
            lport: u16_at(68),
            rport: u16_at(70),
            rid: u16_at(72),
        })
    }

    /// The record the kernel would write for this event (tests).
    pub fn to_raw(&self) -> [u8; RAW_EVENT_LEN] {
        let mut b = [0u8; RAW_EVENT_LEN];
        let epoll = if self.kind == Kind::Write {
            self.tx
        } else {
            self.epoll
        };
        for (o, v) in [
            (0, self.ts),
            (8, self.enter),
            (16, self.sk),
            (24, epoll),
            (32, self.wakeup),
            (40, self.oncpu),
            (48, self.rx_realtime),
        ] {
            b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
        }
        b[56..60].copy_from_slice(&self.tid.to_ne_bytes());
        b[60..64].copy_from_slice(&self.seq.to_ne_bytes());
        b[64..68].copy_from_slice(&self.bytes.to_ne_bytes());
        b[68..70].copy_from_slice(&self.lport.to_ne_bytes());
        b[70..72].copy_from_slice(&self.rport.to_ne_bytes());
        b[72..74].copy_from_slice(&self.rid.to_ne_bytes());
        b[74] = match self.kind {
            Kind::Arrival => 1,
            Kind::Read => 2,
            Kind::Write => 3,
        };
        b[75] = match self.proto {
            Proto::Tcp => 6,
            Proto::Udp => 17,
        };
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let e = Event {
            kind: Kind::Write,
            proto: Proto::Udp,
            ts: 10,
            enter: 9,
            sk: 0xffff_8880_0000_1000,
            epoll: 0,
            wakeup: 3,
            oncpu: 4,
            tx: 8,
            rx_realtime: 0,
            rx: 0,
            tid: 77,
            seq: 0xffff_fff0,
            bytes: 1500,
            lport: 11211,
            rport: 40000,
            rid: 513,
        };
        assert_eq!(Event::parse(&e.to_raw()), Some(e));
        assert_eq!(Event::parse(&e.to_raw()[..79]), None);
        let mut bad = e.to_raw();
        bad[74] = 9;
        assert_eq!(Event::parse(&bad), None);
        bad = e.to_raw();
        bad[75] = 1;
        assert_eq!(Event::parse(&bad), None);
        // An arrival keeps its packet's receive stamp (realtime); mapping subtracts the
        // offset, and a missing stamp stays missing.
        let mut a = Event {
            kind: Kind::Arrival,
            tx: 0,
            rx_realtime: 1_700_000_000_000_000_123,
            ..e
        };
        let mut back = Event::parse(&a.to_raw()).unwrap();
        assert_eq!(back, a);
        back.map_rx(1_700_000_000_000_000_000);
        assert_eq!(back.rx, 123);
        a.rx_realtime = 0;
        a.map_rx(5);
        assert_eq!(a.rx, 0);
    }
}
