//! Adaptive read-ahead of one handle.

/// Adaptive read-ahead of one handle: the window doubles while reads are
/// sequential (up to `max`) and closes on a seek.
#[derive(Default)]
pub(crate) struct ReadAhead {
    next: u64,
    window: u64,
}

pub(crate) const RA_MIN: u64 = 256 << 10;
pub(crate) const NEAR: u64 = 4 << 20;

impl ReadAhead {
    pub(crate) fn on_read(&mut self, off: u64, len: u64, max: u64) -> u64 {
        let sequential =
            off + NEAR >= self.next && off <= self.next + NEAR && self.next > 0 || off == 0;
        self.window = if sequential {
            (self.window * 2).clamp(RA_MIN, max.max(RA_MIN))
        } else {
            0
        };
        self.next = self.next.max(off + len);
        if !sequential {
            self.next = off + len;
        }
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(crate) fn read_ahead_grows_while_sequential_and_closes_on_a_seek() {
        let mut ra = ReadAhead::default();
        let max = 8 << 20;
        let mut w = Vec::new();
        let mut off = 0;
        for _ in 0..8 {
            w.push(ra.on_read(off, 128 << 10, max));
            off += 128 << 10;
        }
        assert_eq!(w[0], RA_MIN);
        assert!(w.windows(2).all(|p| p[1] >= p[0]));
        assert_eq!(*w.last().unwrap(), max);
        // A far seek: no read-ahead until reads are sequential again.
        assert_eq!(ra.on_read(900 << 20, 4096, max), 0);
        assert_eq!(ra.on_read((900 << 20) + 4096, 4096, max), RA_MIN);
    }
}
