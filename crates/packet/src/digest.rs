//! DigestSha256 (SignatureType 0): the SignatureValue is the SHA-256 of the
//! signed portion. It needs no key and proves only that the bytes are intact,
//! not who made them; keyed signatures live in `granary-security`, whose
//! `Signer::Digest` signs through [`value`] too.

use std::convert::Infallible;

use bytes::Bytes;

use crate::types::sig_type;
use crate::{Data, DataBuilder, Interest, InterestFields, SignatureInfo};

/// Length of a DigestSha256 SignatureValue.
pub const LEN: usize = 32;

/// The DigestSha256 SignatureValue of `signed` (a signed portion). Its
/// signature fits the `sign` argument of [`DataBuilder::sign_with`],
/// [`DataBuilder::sign_with_content`] and [`InterestFields::sign_with`],
/// with whatever error type the caller's other closures have.
pub fn value<E>(signed: &[u8]) -> Result<Bytes, E> {
    Ok(Bytes::copy_from_slice(&crate::sha256(signed)))
}

/// Signs `b` with DigestSha256: its SignatureInfo becomes DigestSha256
/// ([`DataBuilder::new`]'s default) keeping a ValidityPeriod already there.
pub fn sign_data(mut b: DataBuilder) -> Data {
    let validity = b.sig_info.validity;
    b.sig_info = SignatureInfo::new(sig_type::DIGEST_SHA256);
    b.sig_info.validity = validity;
    b.sign_with(LEN, value::<Infallible>)
        .unwrap_or_else(|never| match never {})
}

/// Signs `f` with DigestSha256 (a signed Interest v0.3 without a key): its
/// InterestSignatureInfo is given the DigestSha256 type, or made when there
/// is none; its other fields (SignatureNonce, SignatureTime, …) are kept.
pub fn sign_interest(mut f: InterestFields) -> Interest {
    f.sig_info
        .get_or_insert_with(|| SignatureInfo::new(sig_type::DIGEST_SHA256))
        .sig_type = sig_type::DIGEST_SHA256;
    f.sign_with(value::<Infallible>)
        .unwrap_or_else(|never| match never {})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Name;

    #[test]
    fn data_and_interest_carry_the_digest_of_their_signed_portion() {
        let name = Name::from_uri("/a/b").unwrap();
        let d = sign_data(DataBuilder::new(name.clone()).content(&b"hello"[..]));
        assert_eq!(d.sig_info().sig_type, sig_type::DIGEST_SHA256);
        assert_eq!(d.sig_value(), &crate::sha256(d.signed_portion())[..]);
        let again = Data::decode(Bytes::copy_from_slice(d.wire())).unwrap();
        assert_eq!(again, d);

        let mut f = InterestFields::new(name);
        f.nonce = Some(1);
        let i = sign_interest(f);
        let si = i.sig_info.as_ref().unwrap();
        assert_eq!(si.sig_type, sig_type::DIGEST_SHA256);
        let again = Interest::decode(i.wire().clone()).unwrap();
        assert_eq!(
            again.sig_value.as_deref().unwrap(),
            &crate::sha256(&again.signed_portion().unwrap())[..]
        );
    }
}
