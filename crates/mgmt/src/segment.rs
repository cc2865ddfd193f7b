//! Status dataset segmentation, as NFD publishes datasets:
//! `<prefix>/v=<version>/seg=<i>`, FreshnessPeriod 1 s.

use bytes::{Bytes, BytesMut};
use granary_packet::{Component, Data, DataBuilder, Name};

use crate::MgmtError;

/// FreshnessPeriod of dataset segments (ndn-cxx Dispatcher: 1 s).
pub const DATASET_FRESHNESS_MS: u64 = 1000;

/// Largest segment payload NFD produces (ndn-cxx `StatusDatasetContext`:
/// MAX_NDN_PACKET_SIZE − 800 = 8000 bytes).
pub const MAX_DATASET_SEGMENT: usize = 8000;

/// Splits a dataset payload into segments `<prefix>/v=<version>/seg=<i>`,
/// each at most `max_segment` bytes (at least 1 is used), with FreshnessPeriod
/// [`DATASET_FRESHNESS_MS`] and FinalBlockId = the last segment number on every
/// segment (NFD sets it on the last one only; both are valid). An empty payload
/// gives one empty segment. Segment contents share one buffer. The builders
/// carry a DigestSha256 SignatureInfo for the caller to replace and sign.
pub fn segment_dataset(
    prefix: &Name,
    version: u64,
    payload: &[u8],
    max_segment: usize,
) -> Vec<DataBuilder> {
    let max = max_segment.max(1);
    let payload = Bytes::copy_from_slice(payload);
    let count = payload.len().div_ceil(max).max(1);
    let versioned = prefix.append(&Component::version(version));
    let last = Component::segment(count as u64 - 1);
    (0..count)
        .map(|i| {
            let start = i * max;
            let end = (start + max).min(payload.len());
            DataBuilder::new(versioned.append(&Component::segment(i as u64)))
                .freshness_period(DATASET_FRESHNESS_MS)
                .final_block_id(last.clone())
                .content(payload.slice(start.min(end)..end))
        })
        .collect()
}

/// Reassembles a dataset payload from its segments (in any order).
///
/// Every name must be `<prefix>/v=<version>/seg=<i>` with the same prefix and
/// version; segments 0..=n must all be present exactly once, where n is the
/// FinalBlockId. At least one segment must carry a FinalBlockId, and every
/// FinalBlockId present must name the same, last, segment. With a single
/// segment the payload shares its buffer; otherwise it is copied once.
pub fn reassemble_dataset(segments: &[Data]) -> Result<Bytes, MgmtError> {
    let first = segments.first().ok_or(MgmtError::NoSegments)?;
    let versioned = first.name().prefix(-1);
    let mut by_seg: Vec<(u64, &Data)> = Vec::with_capacity(segments.len());
    let mut final_seg: Option<u64> = None;
    for (i, d) in segments.iter().enumerate() {
        let name = d.name();
        let seg = name.last().and_then(|c| c.as_segment());
        let version = name.get(-2).and_then(|c| c.as_version());
        let (Some(seg), Some(_)) = (seg, version) else {
            return Err(MgmtError::BadSegmentName(i));
        };
        if name.prefix(-1) != versioned {
            return Err(MgmtError::MixedSegments);
        }
        if let Some(fb) = d.final_block_id() {
            let fb = fb.as_ref().as_segment().ok_or(MgmtError::BadFinalBlockId)?;
            if final_seg.is_some_and(|f| f != fb) {
                return Err(MgmtError::BadFinalBlockId);
            }
            final_seg = Some(fb);
        }
        by_seg.push((seg, d));
    }
    let last = final_seg.ok_or(MgmtError::BadFinalBlockId)?;
    by_seg.sort_by_key(|&(s, _)| s);
    for (expected, &(seg, _)) in (0u64..).zip(by_seg.iter()) {
        if seg < expected {
            return Err(MgmtError::DuplicateSegment(seg));
        }
        if seg > expected {
            return Err(MgmtError::MissingSegment(expected));
        }
    }
    let have = by_seg.len() as u64;
    if have <= last {
        return Err(MgmtError::MissingSegment(have));
    }
    if have > last + 1 {
        return Err(MgmtError::BadFinalBlockId);
    }
    if let [(_, only)] = by_seg.as_slice() {
        return Ok(only.content_bytes().cloned().unwrap_or_default());
    }
    let mut out = BytesMut::with_capacity(by_seg.iter().map(|(_, d)| d.content().len()).sum());
    for (_, d) in &by_seg {
        out.extend_from_slice(d.content());
    }
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(b: &DataBuilder) -> Data {
        granary_packet::digest::sign_data(b.clone())
    }

    fn prefix() -> Name {
        Name::from_uri("/localhost/nfd/faces/list").unwrap()
    }

    #[test]
    fn segments_are_named_and_marked() {
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let segs = segment_dataset(&prefix(), 1234, &payload, 1000);
        assert_eq!(segs.len(), 3);
        for (i, b) in segs.iter().enumerate() {
            let d = sign(b);
            assert_eq!(
                d.name().to_string(),
                format!("/localhost/nfd/faces/list/v=1234/seg={i}")
            );
            assert_eq!(d.freshness_period(), 1000);
            assert_eq!(d.final_block_id(), Some(&Component::segment(2)));
        }
        assert_eq!(segs[2].content.as_ref().unwrap().len(), 500);
        let data: Vec<Data> = segs.iter().rev().map(sign).collect();
        assert_eq!(reassemble_dataset(&data).unwrap().as_ref(), &payload[..]);
    }

    #[test]
    fn boundaries() {
        let one = segment_dataset(&prefix(), 1, b"", MAX_DATASET_SEGMENT);
        assert_eq!(one.len(), 1);
        let d = sign(&one[0]);
        assert_eq!(d.content(), b"");
        assert_eq!(reassemble_dataset(&[d]).unwrap(), Bytes::new());
        assert_eq!(segment_dataset(&prefix(), 1, &[0; 8000], 8000).len(), 1);
        assert_eq!(segment_dataset(&prefix(), 1, &[0; 8001], 8000).len(), 2);
        // max_segment 0 is treated as 1.
        assert_eq!(segment_dataset(&prefix(), 1, b"abc", 0).len(), 3);
    }

    #[test]
    fn reassembly_errors() {
        let data: Vec<Data> = segment_dataset(&prefix(), 7, b"abcdef", 2)
            .iter()
            .map(sign)
            .collect();
        assert_eq!(reassemble_dataset(&[]), Err(MgmtError::NoSegments));
        assert_eq!(
            reassemble_dataset(&data[..2]),
            Err(MgmtError::MissingSegment(2))
        );
        assert_eq!(
            reassemble_dataset(&[data[0].clone(), data[2].clone()]),
            Err(MgmtError::MissingSegment(1))
        );
        assert_eq!(
            reassemble_dataset(&[
                data[0].clone(),
                data[1].clone(),
                data[1].clone(),
                data[2].clone()
            ]),
            Err(MgmtError::DuplicateSegment(1))
        );
        let other = sign(&segment_dataset(&prefix(), 8, b"ab", 2)[0]);
        assert_eq!(
            reassemble_dataset(&[data[0].clone(), other]),
            Err(MgmtError::MixedSegments)
        );
        // No FinalBlockId anywhere.
        let mut b = DataBuilder::new(
            prefix()
                .append(&Component::version(1))
                .append(&Component::segment(0)),
        );
        b = b.content(Bytes::from_static(b"x"));
        assert_eq!(
            reassemble_dataset(&[sign(&b)]),
            Err(MgmtError::BadFinalBlockId)
        );
        // Not a segment name.
        let d = sign(&DataBuilder::new(prefix()));
        assert_eq!(reassemble_dataset(&[d]), Err(MgmtError::BadSegmentName(0)));
    }
}
