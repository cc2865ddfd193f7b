//! Assigned values of enumerated and flag fields (ndn-cxx `nfd-constants.hpp`).
//! The structures keep these fields as plain `u64` so that any value on the
//! wire round-trips.

/// FaceScope values.
pub mod face_scope {
    /// Non-local (network) face.
    pub const NON_LOCAL: u64 = 0;
    /// Local (application) face.
    pub const LOCAL: u64 = 1;
}

/// FacePersistency values.
pub mod face_persistency {
    /// Persistent: closed on failure, not on idle.
    pub const PERSISTENT: u64 = 0;
    /// On-demand: closed when idle or on failure.
    pub const ON_DEMAND: u64 = 1;
    /// Permanent: kept across failures.
    pub const PERMANENT: u64 = 2;
}

/// LinkType values.
pub mod link_type {
    /// Point-to-point.
    pub const POINT_TO_POINT: u64 = 0;
    /// Multi-access (e.g. Ethernet multicast).
    pub const MULTI_ACCESS: u64 = 1;
    /// Ad hoc.
    pub const AD_HOC: u64 = 2;
}

/// Face Flags bits (FaceStatus, ControlParameters with Mask).
pub mod face_flags {
    /// LocalFieldsEnabled (bit 0).
    pub const LOCAL_FIELDS_ENABLED: u64 = 1 << 0;
    /// LpReliabilityEnabled (bit 1).
    pub const LP_RELIABILITY_ENABLED: u64 = 1 << 1;
    /// CongestionMarkingEnabled (bit 2).
    pub const CONGESTION_MARKING_ENABLED: u64 = 1 << 2;
}

/// Route Flags bits (RIB Route, rib/register).
pub mod route_flags {
    /// ChildInherit (bit 0).
    pub const CHILD_INHERIT: u64 = 1 << 0;
    /// Capture (bit 1).
    pub const CAPTURE: u64 = 1 << 1;
}

/// Route Origin values.
pub mod route_origin {
    /// Application.
    pub const APP: u64 = 0;
    /// Automatic prefix registration of local faces.
    pub const AUTOREG: u64 = 64;
    /// Client (nfdc).
    pub const CLIENT: u64 = 65;
    /// Auto-configuration (hub discovery).
    pub const AUTOCONF: u64 = 66;
    /// NLSR.
    pub const NLSR: u64 = 128;
    /// Prefix announcement.
    pub const PREFIXANN: u64 = 129;
    /// Static (configuration file).
    pub const STATIC: u64 = 255;
}

/// CsInfo / cs/config Flags bits.
pub mod cs_flags {
    /// EnableAdmit (bit 0).
    pub const ENABLE_ADMIT: u64 = 1 << 0;
    /// EnableServe (bit 1).
    pub const ENABLE_SERVE: u64 = 1 << 1;
}

/// FaceEventKind values (face event notifications).
pub mod face_event_kind {
    /// Face created.
    pub const CREATED: u64 = 1;
    /// Face destroyed.
    pub const DESTROYED: u64 = 2;
    /// Face went up.
    pub const UP: u64 = 3;
    /// Face went down.
    pub const DOWN: u64 = 4;
}
