//! Assigned TLV-TYPE numbers (NDN packet format v0.3, NDNLPv2) and their names.

/// Interest packet.
pub const INTEREST: u64 = 5;
/// Data packet.
pub const DATA: u64 = 6;
/// Name.
pub const NAME: u64 = 7;

/// ImplicitSha256DigestComponent.
pub const COMP_IMPLICIT_DIGEST: u64 = 1;
/// ParametersSha256DigestComponent.
pub const COMP_PARAMS_DIGEST: u64 = 2;
/// GenericNameComponent.
pub const COMP_GENERIC: u64 = 8;
/// KeywordNameComponent.
pub const COMP_KEYWORD: u64 = 32;
/// SegmentNameComponent.
pub const COMP_SEGMENT: u64 = 50;
/// ByteOffsetNameComponent.
pub const COMP_BYTE_OFFSET: u64 = 52;
/// VersionNameComponent.
pub const COMP_VERSION: u64 = 54;
/// TimestampNameComponent.
pub const COMP_TIMESTAMP: u64 = 56;
/// SequenceNumNameComponent.
pub const COMP_SEQUENCE_NUM: u64 = 58;

/// CanBePrefix.
pub const CAN_BE_PREFIX: u64 = 33;
/// MustBeFresh.
pub const MUST_BE_FRESH: u64 = 18;
/// ForwardingHint.
pub const FORWARDING_HINT: u64 = 30;
/// Nonce.
pub const NONCE: u64 = 10;
/// InterestLifetime.
pub const INTEREST_LIFETIME: u64 = 12;
/// HopLimit.
pub const HOP_LIMIT: u64 = 34;
/// ApplicationParameters.
pub const APPLICATION_PARAMETERS: u64 = 36;
/// InterestSignatureInfo.
pub const INTEREST_SIGNATURE_INFO: u64 = 44;
/// InterestSignatureValue.
pub const INTEREST_SIGNATURE_VALUE: u64 = 46;
/// SignatureNonce.
pub const SIGNATURE_NONCE: u64 = 38;
/// SignatureTime.
pub const SIGNATURE_TIME: u64 = 40;
/// SignatureSeqNum.
pub const SIGNATURE_SEQ_NUM: u64 = 42;

/// MetaInfo.
pub const META_INFO: u64 = 20;
/// ContentType.
pub const CONTENT_TYPE: u64 = 24;
/// FreshnessPeriod.
pub const FRESHNESS_PERIOD: u64 = 25;
/// FinalBlockId.
pub const FINAL_BLOCK_ID: u64 = 26;
/// Content.
pub const CONTENT: u64 = 21;
/// SignatureInfo (Data).
pub const SIGNATURE_INFO: u64 = 22;
/// SignatureValue (Data).
pub const SIGNATURE_VALUE: u64 = 23;
/// SignatureType.
pub const SIGNATURE_TYPE: u64 = 27;
/// KeyLocator.
pub const KEY_LOCATOR: u64 = 28;
/// KeyDigest.
pub const KEY_DIGEST: u64 = 29;
/// ValidityPeriod.
pub const VALIDITY_PERIOD: u64 = 253;
/// NotBefore.
pub const NOT_BEFORE: u64 = 254;
/// NotAfter.
pub const NOT_AFTER: u64 = 255;

/// LpPacket.
pub const LP_PACKET: u64 = 100;
/// Fragment.
pub const LP_FRAGMENT: u64 = 80;
/// Sequence.
pub const LP_SEQUENCE: u64 = 81;
/// FragIndex.
pub const LP_FRAG_INDEX: u64 = 82;
/// FragCount.
pub const LP_FRAG_COUNT: u64 = 83;
/// PitToken.
pub const LP_PIT_TOKEN: u64 = 98;
/// Nack.
pub const LP_NACK: u64 = 800;
/// NackReason.
pub const LP_NACK_REASON: u64 = 801;
/// IncomingFaceId.
pub const LP_INCOMING_FACE_ID: u64 = 812;
/// NextHopFaceId.
pub const LP_NEXT_HOP_FACE_ID: u64 = 816;
/// CachePolicy.
pub const LP_CACHE_POLICY: u64 = 820;
/// CachePolicyType.
pub const LP_CACHE_POLICY_TYPE: u64 = 821;
/// CongestionMark.
pub const LP_CONGESTION_MARK: u64 = 832;
/// Ack.
pub const LP_ACK: u64 = 836;
/// TxSequence.
pub const LP_TX_SEQUENCE: u64 = 840;
/// NonDiscovery.
pub const LP_NON_DISCOVERY: u64 = 844;
/// PrefixAnnouncement.
pub const LP_PREFIX_ANNOUNCEMENT: u64 = 848;

/// ContentType values.
pub mod content_type {
    /// BLOB.
    pub const BLOB: u64 = 0;
    /// LINK.
    pub const LINK: u64 = 1;
    /// KEY (certificates).
    pub const KEY: u64 = 2;
    /// NACK (application-level).
    pub const NACK: u64 = 3;
    /// PREFIX_ANN.
    pub const PREFIX_ANN: u64 = 5;
}

/// SignatureType values.
pub mod sig_type {
    /// DigestSha256.
    pub const DIGEST_SHA256: u64 = 0;
    /// SignatureSha256WithRsa.
    pub const SHA256_WITH_RSA: u64 = 1;
    /// SignatureSha256WithEcdsa.
    pub const SHA256_WITH_ECDSA: u64 = 3;
    /// SignatureHmacWithSha256.
    pub const HMAC_WITH_SHA256: u64 = 4;
    /// SignatureEd25519.
    pub const ED25519: u64 = 5;
    /// Null signature (accepted only where configured).
    pub const NULL: u64 = 200;

    /// Human name of a signature type.
    pub fn name(t: u64) -> &'static str {
        match t {
            DIGEST_SHA256 => "DigestSha256",
            SHA256_WITH_RSA => "SignatureSha256WithRsa",
            SHA256_WITH_ECDSA => "SignatureSha256WithEcdsa",
            HMAC_WITH_SHA256 => "SignatureHmacWithSha256",
            ED25519 => "SignatureEd25519",
            NULL => "SignatureNull",
            _ => "Unknown",
        }
    }
}

/// NackReason values.
pub mod nack_reason {
    /// No reason given.
    pub const NONE: u64 = 0;
    /// Congestion.
    pub const CONGESTION: u64 = 50;
    /// Duplicate (loop).
    pub const DUPLICATE: u64 = 100;
    /// NoRoute.
    pub const NO_ROUTE: u64 = 150;

    /// Human name of a Nack reason.
    pub fn name(r: u64) -> &'static str {
        match r {
            NONE => "None",
            CONGESTION => "Congestion",
            DUPLICATE => "Duplicate",
            NO_ROUTE => "NoRoute",
            _ => "Unknown",
        }
    }
}

/// Name of a TLV-TYPE for messages and dissection (context-free best guess).
pub fn type_name(t: u64) -> &'static str {
    match t {
        COMP_IMPLICIT_DIGEST => "ImplicitSha256DigestComponent",
        COMP_PARAMS_DIGEST => "ParametersSha256DigestComponent",
        INTEREST => "Interest",
        DATA => "Data",
        NAME => "Name",
        COMP_GENERIC => "GenericNameComponent",
        NONCE => "Nonce",
        INTEREST_LIFETIME => "InterestLifetime",
        MUST_BE_FRESH => "MustBeFresh",
        META_INFO => "MetaInfo",
        CONTENT => "Content",
        SIGNATURE_INFO => "SignatureInfo",
        SIGNATURE_VALUE => "SignatureValue",
        CONTENT_TYPE => "ContentType",
        FRESHNESS_PERIOD => "FreshnessPeriod",
        FINAL_BLOCK_ID => "FinalBlockId",
        SIGNATURE_TYPE => "SignatureType",
        KEY_LOCATOR => "KeyLocator",
        KEY_DIGEST => "KeyDigest",
        FORWARDING_HINT => "ForwardingHint",
        COMP_KEYWORD => "KeywordNameComponent",
        CAN_BE_PREFIX => "CanBePrefix",
        HOP_LIMIT => "HopLimit",
        APPLICATION_PARAMETERS => "ApplicationParameters",
        SIGNATURE_NONCE => "SignatureNonce",
        SIGNATURE_TIME => "SignatureTime",
        SIGNATURE_SEQ_NUM => "SignatureSeqNum",
        INTEREST_SIGNATURE_INFO => "InterestSignatureInfo",
        INTEREST_SIGNATURE_VALUE => "InterestSignatureValue",
        COMP_SEGMENT => "SegmentNameComponent",
        COMP_BYTE_OFFSET => "ByteOffsetNameComponent",
        COMP_VERSION => "VersionNameComponent",
        COMP_TIMESTAMP => "TimestampNameComponent",
        COMP_SEQUENCE_NUM => "SequenceNumNameComponent",
        LP_FRAGMENT => "Fragment",
        LP_SEQUENCE => "Sequence",
        LP_FRAG_INDEX => "FragIndex",
        LP_FRAG_COUNT => "FragCount",
        LP_PIT_TOKEN => "PitToken",
        LP_PACKET => "LpPacket",
        VALIDITY_PERIOD => "ValidityPeriod",
        NOT_BEFORE => "NotBefore",
        NOT_AFTER => "NotAfter",
        LP_NACK => "Nack",
        LP_NACK_REASON => "NackReason",
        LP_INCOMING_FACE_ID => "IncomingFaceId",
        LP_NEXT_HOP_FACE_ID => "NextHopFaceId",
        LP_CACHE_POLICY => "CachePolicy",
        LP_CACHE_POLICY_TYPE => "CachePolicyType",
        LP_CONGESTION_MARK => "CongestionMark",
        LP_ACK => "Ack",
        LP_TX_SEQUENCE => "TxSequence",
        LP_NON_DISCOVERY => "NonDiscovery",
        LP_PREFIX_ANNOUNCEMENT => "PrefixAnnouncement",
        _ => "Unknown",
    }
}
