//! Cutting whole TLV elements out of a byte stream.

use bytes::{Bytes, BytesMut};
use granary_packet::tlv::read_var_number;

/// Why a stream cannot go on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// An element longer than the limit.
    #[error("element of {0} bytes exceeds the {1}-byte limit")]
    TooLarge(u64, usize),
    /// A malformed TLV header.
    #[error("malformed TLV header: {0}")]
    Malformed(String),
}

/// Takes the next complete TLV element off the front of `buf`, if there is one.
pub fn next_frame(buf: &mut BytesMut, max: usize) -> Result<Option<Bytes>, FrameError> {
    if buf.is_empty() {
        return Ok(None);
    }
    let (typ, tl) = match read_var_number(buf, 0) {
        Ok(x) => x,
        Err(e) if matches!(e.kind, granary_packet::ErrorKind::Truncated { .. }) => return Ok(None),
        Err(e) => return Err(FrameError::Malformed(e.to_string())),
    };
    if typ == 0 {
        return Err(FrameError::Malformed("TLV-TYPE 0".into()));
    }
    let (len, ll) = match read_var_number(buf, tl) {
        Ok(x) => x,
        Err(e) if matches!(e.kind, granary_packet::ErrorKind::Truncated { .. }) => return Ok(None),
        Err(e) => return Err(FrameError::Malformed(e.to_string())),
    };
    // The LpPacket envelope may add a little to a maximum-size packet.
    let limit = max + 64;
    // An 8-byte TLV-LENGTH near u64::MAX must not overflow (garbage on a socket).
    let total = len.saturating_add((tl + ll) as u64);
    if total > limit as u64 {
        return Err(FrameError::TooLarge(total, limit));
    }
    if buf.len() < total as usize {
        buf.reserve(total as usize - buf.len());
        return Ok(None);
    }
    Ok(Some(buf.split_to(total as usize).freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_and_join() {
        let mut b = BytesMut::new();
        b.extend_from_slice(&[5, 3, 7, 1]);
        assert_eq!(next_frame(&mut b, 8800).unwrap(), None);
        b.extend_from_slice(&[8, 6, 0]);
        assert_eq!(
            next_frame(&mut b, 8800).unwrap().unwrap().as_ref(),
            &[5, 3, 7, 1, 8]
        );
        assert_eq!(next_frame(&mut b, 8800).unwrap().unwrap().as_ref(), &[6, 0]);
        assert_eq!(next_frame(&mut b, 8800).unwrap(), None);
    }

    #[test]
    fn oversized_and_garbage_rejected() {
        let mut b = BytesMut::from(&[6u8, 0xFE, 0, 1, 0, 0][..]);
        assert!(matches!(
            next_frame(&mut b, 8800),
            Err(FrameError::TooLarge(..))
        ));
        let mut b = BytesMut::from(&[0u8, 1, 2][..]);
        assert!(next_frame(&mut b, 8800).is_err());
        let mut b = BytesMut::from(&[0xFDu8, 0, 5, 0][..]);
        assert!(next_frame(&mut b, 8800).is_err(), "non-minimal type");
        // TLV-LENGTH u64::MAX: too large, not an overflow.
        let mut b = BytesMut::from(&[0xFFu8; 64][..]);
        assert!(matches!(
            next_frame(&mut b, 8800),
            Err(FrameError::TooLarge(u64::MAX, _))
        ));
    }
}
