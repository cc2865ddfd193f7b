//! Offset ↔ segment arithmetic, in one place. Byte ranges and resume go
//! through [`SegmentMap`] only, so variable-size (content-defined) segments
//! can be added as another variant without touching the fetch code.

use std::ops::Range;

/// Where each segment's bytes sit in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentMap {
    /// Every segment but the last has `segment_size` bytes.
    Fixed {
        /// Bytes per segment.
        segment_size: u64,
        /// Number of segments.
        count: u64,
        /// File size, when known (manifest or RDR Size).
        file_size: Option<u64>,
    },
    /// Content-defined segments of varying size (a format-2 manifest gives
    /// every segment's offset and length).
    Variable {
        /// Start of every segment, then the file size (count + 1 entries,
        /// non-decreasing).
        starts: std::sync::Arc<Vec<u64>>,
        /// Largest segment.
        max_segment: u64,
    },
    /// Segments whose sizes are known only once they arrive: a per-packet
    /// fetch (no manifest) from a producer whose segments are not provably
    /// all one size — content-defined (FastCDC, Rabin) or ndn-cxx-style
    /// with a short last segment — whose end is its FinalBlockId. The
    /// fetch places them in order as they come ([`crate::ObjectJob`]);
    /// offsets are not known in advance, so `start`/`segment_of` say 0.
    Sequential {
        /// Number of segments (FinalBlockId + 1).
        count: u64,
        /// File size, when the metadata gives it (checked at the end).
        file_size: Option<u64>,
    },
}

impl SegmentMap {
    /// A fixed-size map. With a file size, the count must agree with it.
    pub fn fixed(
        segment_size: u64,
        count: u64,
        file_size: Option<u64>,
    ) -> Result<SegmentMap, String> {
        if segment_size == 0 && count > 1 {
            return Err("segment size 0 with more than one segment".into());
        }
        if let Some(size) = file_size {
            let want = if size == 0 {
                1
            } else {
                size.div_ceil(segment_size.max(1))
            };
            if want != count.max(1) {
                return Err(format!(
                    "{count} segments of {segment_size} bytes cannot hold {size} bytes"
                ));
            }
        }
        Ok(SegmentMap::Fixed {
            segment_size,
            count: count.max(1),
            file_size,
        })
    }

    /// A variable-size map from every segment's `(offset, length)`, in
    /// order; they must tile `[0, file_size)` exactly.
    pub fn variable(
        spans: impl IntoIterator<Item = (u64, u64)>,
        file_size: u64,
    ) -> Result<SegmentMap, String> {
        let mut starts = Vec::new();
        let mut next = 0u64;
        let mut max_segment = 0;
        for (i, (off, len)) in spans.into_iter().enumerate() {
            if off != next {
                return Err(format!("segment {i} starts at {off}, expected {next}"));
            }
            starts.push(off);
            next = off
                .checked_add(len)
                .ok_or_else(|| format!("segment {i} overflows"))?;
            max_segment = max_segment.max(len);
        }
        if next != file_size {
            return Err(format!(
                "segments end at {next}, the file has {file_size} bytes"
            ));
        }
        if starts.is_empty() {
            starts.push(0); // an empty file is one empty segment
        }
        starts.push(file_size);
        Ok(SegmentMap::Variable {
            starts: std::sync::Arc::new(starts),
            max_segment,
        })
    }

    /// Number of segments.
    pub fn count(&self) -> u64 {
        match self {
            SegmentMap::Fixed { count, .. } => *count,
            SegmentMap::Variable { starts, .. } => starts.len() as u64 - 1,
            SegmentMap::Sequential { count, .. } => *count,
        }
    }

    /// File size, when known.
    pub fn file_size(&self) -> Option<u64> {
        match self {
            SegmentMap::Fixed { file_size, .. } => *file_size,
            SegmentMap::Variable { starts, .. } => starts.last().copied(),
            SegmentMap::Sequential { file_size, .. } => *file_size,
        }
    }

    /// Nominal segment size (the largest, for variable segments).
    pub fn segment_size(&self) -> u64 {
        match self {
            SegmentMap::Fixed { segment_size, .. } => *segment_size,
            SegmentMap::Variable { max_segment, .. } => *max_segment,
            SegmentMap::Sequential { .. } => 0,
        }
    }

    /// Offset of segment `seg`'s first byte.
    pub fn start(&self, seg: u64) -> u64 {
        match self {
            SegmentMap::Fixed { segment_size, .. } => seg * segment_size,
            SegmentMap::Variable { starts, .. } => starts[(seg as usize).min(starts.len() - 1)],
            SegmentMap::Sequential { .. } => 0,
        }
    }

    /// Expected length of `seg` (`None`: the last one of a file of unknown size).
    pub fn len(&self, seg: u64) -> Option<u64> {
        match self {
            SegmentMap::Fixed {
                segment_size,
                count,
                file_size,
            } => {
                if seg + 1 < *count {
                    Some(*segment_size)
                } else {
                    file_size.map(|f| f - seg * segment_size)
                }
            }
            SegmentMap::Variable { starts, .. } => {
                let i = seg as usize;
                (i + 1 < starts.len()).then(|| starts[i + 1] - starts[i])
            }
            SegmentMap::Sequential { .. } => None,
        }
    }

    /// The segment holding byte `offset` (clamped to the last one).
    pub fn segment_of(&self, offset: u64) -> u64 {
        match self {
            SegmentMap::Fixed {
                segment_size,
                count,
                ..
            } => (offset / (*segment_size).max(1)).min(count.saturating_sub(1)),
            SegmentMap::Variable { starts, .. } => {
                // The last segment whose start is ≤ offset (skipping empty ones).
                let i = starts[..starts.len() - 1].partition_point(|s| *s <= offset);
                (i.saturating_sub(1) as u64).min(self.count().saturating_sub(1))
            }
            SegmentMap::Sequential { .. } => 0,
        }
    }

    /// Segments overlapping bytes `[lo, hi)`; empty when the range is.
    pub fn covering(&self, lo: u64, hi: u64) -> Range<u64> {
        let hi = self.file_size().map_or(hi, |f| hi.min(f));
        if hi <= lo {
            return 0..0;
        }
        if let SegmentMap::Sequential { count, .. } = self {
            return 0..*count;
        }
        let first = self.segment_of(lo);
        let last = self.segment_of(hi - 1);
        first..last + 1
    }

    /// True for [`SegmentMap::Sequential`].
    pub fn is_sequential(&self) -> bool {
        matches!(self, SegmentMap::Sequential { .. })
    }

    /// Checks a received segment's length.
    pub fn check_len(&self, seg: u64, len: u64) -> Result<(), String> {
        match (self.len(seg), self) {
            (Some(want), _) if want != len => {
                Err(format!("segment {seg} has {len} bytes, expected {want}"))
            }
            (None, SegmentMap::Fixed { segment_size, .. }) if len > *segment_size => Err(format!(
                "last segment {seg} has {len} bytes, more than the segment size {segment_size}"
            )),
            (
                None,
                SegmentMap::Sequential {
                    file_size: Some(f), ..
                },
            ) if len > *f => Err(format!(
                "segment {seg} has {len} bytes, more than the whole object ({f})"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_at_boundaries_inside_and_at_the_end() {
        let m = SegmentMap::fixed(100, 10, Some(950)).unwrap();
        assert_eq!(m.covering(0, 100), 0..1);
        assert_eq!(m.covering(100, 200), 1..2);
        assert_eq!(m.covering(99, 101), 0..2);
        assert_eq!(m.covering(150, 160), 1..2);
        assert_eq!(m.covering(900, 10_000), 9..10);
        assert_eq!(m.covering(949, 950), 9..10);
        assert_eq!(m.covering(950, 960), 0..0);
        assert_eq!(m.len(9), Some(50));
        assert_eq!(m.len(3), Some(100));
        assert!(m.check_len(9, 50).is_ok() && m.check_len(9, 51).is_err());
        assert!(SegmentMap::fixed(100, 9, Some(950)).is_err());
        let e = SegmentMap::fixed(8192, 1, Some(0)).unwrap();
        assert_eq!(e.covering(0, 10), 0..0);
        assert_eq!(e.len(0), Some(0));
        let u = SegmentMap::fixed(100, 3, None).unwrap();
        assert_eq!(u.len(2), None);
        assert!(u.check_len(2, 7).is_ok() && u.check_len(2, 101).is_err());
        assert_eq!(u.covering(250, u64::MAX), 2..3);
    }

    #[test]
    fn variable_segments() {
        let m = SegmentMap::variable([(0, 100), (100, 30), (130, 70)], 200).unwrap();
        assert_eq!(m.count(), 3);
        assert_eq!((m.start(1), m.len(1)), (100, Some(30)));
        assert_eq!(m.len(3), None);
        assert_eq!(m.segment_of(0), 0);
        assert_eq!(m.segment_of(99), 0);
        assert_eq!(m.segment_of(100), 1);
        assert_eq!(m.segment_of(129), 1);
        assert_eq!(m.segment_of(130), 2);
        assert_eq!(m.segment_of(10_000), 2);
        assert_eq!(m.covering(99, 131), 0..3);
        assert_eq!(m.covering(200, 300), 0..0);
        assert_eq!(m.segment_size(), 100);
        assert!(m.check_len(1, 30).is_ok() && m.check_len(1, 31).is_err());
        assert!(SegmentMap::variable([(0, 100), (90, 10)], 100).is_err());
        assert!(SegmentMap::variable([(0, 100)], 101).is_err());
        let e = SegmentMap::variable([(0, 0)], 0).unwrap();
        assert_eq!((e.count(), e.len(0)), (1, Some(0)));
        assert_eq!(e.covering(0, 10), 0..0);
    }
}
