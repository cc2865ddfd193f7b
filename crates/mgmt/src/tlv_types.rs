//! TLV-TYPE numbers of the NFD management protocol (ndn-cxx `tlv-nfd.hpp`,
//! NFD wiki ControlCommand / FaceMgmt / FibMgmt / RibMgmt / CsMgmt /
//! StrategyChoice / ForwarderStatus). The numbers are context-dependent: 128
//! is NfdVersion at the top of a ForwarderStatus payload and FaceStatus,
//! FibEntry, RibEntry, StrategyChoice or CsInfo as a dataset item; 129 is
//! LocalUri, StartTimestamp, NextHopRecord, Route or NHits.

// ControlResponse
/// ControlResponse.
pub const CONTROL_RESPONSE: u64 = 101;
/// StatusCode.
pub const STATUS_CODE: u64 = 102;
/// StatusText.
pub const STATUS_TEXT: u64 = 103;

// ControlParameters
/// ControlParameters.
pub const CONTROL_PARAMETERS: u64 = 104;
/// FaceId.
pub const FACE_ID: u64 = 105;
/// Cost.
pub const COST: u64 = 106;
/// Strategy (holds a Name).
pub const STRATEGY: u64 = 107;
/// Flags.
pub const FLAGS: u64 = 108;
/// ExpirationPeriod (milliseconds).
pub const EXPIRATION_PERIOD: u64 = 109;
/// Origin.
pub const ORIGIN: u64 = 111;
/// Mask.
pub const MASK: u64 = 112;
/// Uri.
pub const URI: u64 = 114;
/// LocalUri.
pub const LOCAL_URI: u64 = 129;
/// Capacity.
pub const CAPACITY: u64 = 131;
/// Count.
pub const COUNT: u64 = 132;
/// FacePersistency.
pub const FACE_PERSISTENCY: u64 = 133;
/// BaseCongestionMarkingInterval (nanoseconds).
pub const BASE_CONGESTION_MARKING_INTERVAL: u64 = 135;
/// DefaultCongestionThreshold (bytes).
pub const DEFAULT_CONGESTION_THRESHOLD: u64 = 136;
/// Mtu.
pub const MTU: u64 = 137;

// Face management
/// FaceStatus (dataset item).
pub const FACE_STATUS: u64 = 128;
/// ChannelStatus (dataset item).
pub const CHANNEL_STATUS: u64 = 130;
/// UriScheme (FaceQueryFilter).
pub const URI_SCHEME: u64 = 131;
/// FaceScope.
pub const FACE_SCOPE: u64 = 132;
/// LinkType.
pub const LINK_TYPE: u64 = 134;
/// VipCapacity: VIPs a face carries per VIP period (a Granary extension,
/// non-critical; present only while the forwarder uses VIP).
pub const VIP_CAPACITY: u64 = 204;
/// NOutCongestionMarks in FaceStatus: Data the face sent with a
/// CongestionMark (a Granary extension, non-critical; NFD's FaceStatus has no
/// such counter).
pub const N_OUT_CONGESTION_MARKS: u64 = 208;
/// NOutQueueDrops in FaceStatus: packets the face dropped because its send
/// queue was full (a Granary extension, non-critical; NFD's FaceStatus has no
/// such counter).
pub const N_OUT_QUEUE_DROPS: u64 = 210;
/// FaceRate in ControlParameters: a face's Data rate in bits/s, from which
/// VIP derives the face's capacity (a Granary extension, non-critical; 0 in
/// faces/update: measure the rate instead).
pub const FACE_RATE: u64 = 206;
/// FaceQueryFilter.
pub const FACE_QUERY_FILTER: u64 = 150;
/// FaceEventNotification.
pub const FACE_EVENT_NOTIFICATION: u64 = 192;
/// FaceEventKind.
pub const FACE_EVENT_KIND: u64 = 193;

// Counters (FaceStatus and ForwarderStatus)
/// NInInterests.
pub const N_IN_INTERESTS: u64 = 144;
/// NInData.
pub const N_IN_DATA: u64 = 145;
/// NOutInterests.
pub const N_OUT_INTERESTS: u64 = 146;
/// NOutData.
pub const N_OUT_DATA: u64 = 147;
/// NInBytes.
pub const N_IN_BYTES: u64 = 148;
/// NOutBytes.
pub const N_OUT_BYTES: u64 = 149;
/// NInNacks.
pub const N_IN_NACKS: u64 = 151;
/// NOutNacks.
pub const N_OUT_NACKS: u64 = 152;
/// NSatisfiedInterests.
pub const N_SATISFIED_INTERESTS: u64 = 153;
/// NUnsatisfiedInterests.
pub const N_UNSATISFIED_INTERESTS: u64 = 154;

// ForwarderStatus (GeneralStatus) top-level fields
/// NfdVersion.
pub const NFD_VERSION: u64 = 128;
/// StartTimestamp (ms since the Unix epoch).
pub const START_TIMESTAMP: u64 = 129;
/// CurrentTimestamp (ms since the Unix epoch).
pub const CURRENT_TIMESTAMP: u64 = 130;
/// NNameTreeEntries.
pub const N_NAME_TREE_ENTRIES: u64 = 131;
/// NFibEntries.
pub const N_FIB_ENTRIES: u64 = 132;
/// NPitEntries.
pub const N_PIT_ENTRIES: u64 = 133;
/// NMeasurementsEntries.
pub const N_MEASUREMENTS_ENTRIES: u64 = 134;
/// NCsEntries (also in CsInfo).
pub const N_CS_ENTRIES: u64 = 135;

// CS management
/// CsInfo (dataset item).
pub const CS_INFO: u64 = 128;
/// NHits.
pub const N_HITS: u64 = 129;
/// NMisses.
pub const N_MISSES: u64 = 130;

// FIB, RIB, strategy choice
/// FibEntry (dataset item).
pub const FIB_ENTRY: u64 = 128;
/// NextHopRecord.
pub const NEXT_HOP_RECORD: u64 = 129;
/// RibEntry (dataset item).
pub const RIB_ENTRY: u64 = 128;
/// Route.
pub const ROUTE: u64 = 129;
/// StrategyChoice (dataset item).
pub const STRATEGY_CHOICE: u64 = 128;

/// Name of a management TLV-TYPE for messages (context-free: the shared
/// numbers 128–135 list every meaning).
pub fn type_name(t: u64) -> &'static str {
    match t {
        CONTROL_RESPONSE => "ControlResponse",
        STATUS_CODE => "StatusCode",
        STATUS_TEXT => "StatusText",
        CONTROL_PARAMETERS => "ControlParameters",
        FACE_ID => "FaceId",
        COST => "Cost",
        STRATEGY => "Strategy",
        FLAGS => "Flags",
        EXPIRATION_PERIOD => "ExpirationPeriod",
        ORIGIN => "Origin",
        MASK => "Mask",
        URI => "Uri",
        128 => "FaceStatus/FibEntry/RibEntry/StrategyChoice/CsInfo/NfdVersion",
        129 => "LocalUri/NextHopRecord/Route/NHits/StartTimestamp",
        130 => "ChannelStatus/NMisses/CurrentTimestamp",
        131 => "Capacity/UriScheme/NNameTreeEntries",
        132 => "Count/FaceScope/NFibEntries",
        133 => "FacePersistency/NPitEntries",
        134 => "LinkType/NMeasurementsEntries",
        135 => "BaseCongestionMarkingInterval/NCsEntries",
        DEFAULT_CONGESTION_THRESHOLD => "DefaultCongestionThreshold",
        MTU => "Mtu",
        N_IN_INTERESTS => "NInInterests",
        N_IN_DATA => "NInData",
        N_OUT_INTERESTS => "NOutInterests",
        N_OUT_DATA => "NOutData",
        N_IN_BYTES => "NInBytes",
        N_OUT_BYTES => "NOutBytes",
        FACE_QUERY_FILTER => "FaceQueryFilter",
        N_IN_NACKS => "NInNacks",
        N_OUT_NACKS => "NOutNacks",
        N_SATISFIED_INTERESTS => "NSatisfiedInterests",
        N_UNSATISFIED_INTERESTS => "NUnsatisfiedInterests",
        FACE_EVENT_NOTIFICATION => "FaceEventNotification",
        FACE_EVENT_KIND => "FaceEventKind",
        _ => granary_packet::types::type_name(t),
    }
}
