//! Name scopes: `/localhost` (never leaves the node) and `/localhop` (one
//! hop at most).

use granary_packet::types::COMP_GENERIC;
use granary_packet::Name;

/// True for a name under `/localhost`.
pub(crate) fn is_localhost(n: &Name) -> bool {
    n.get(0)
        .is_some_and(|c| c.typ == COMP_GENERIC && c.value == b"localhost")
}

/// True for a name under `/localhop`.
pub(crate) fn is_localhop(n: &Name) -> bool {
    n.get(0)
        .is_some_and(|c| c.typ == COMP_GENERIC && c.value == b"localhop")
}

/// True for a name under either.
pub(crate) fn is_local_name(n: &Name) -> bool {
    is_localhost(n) || is_localhop(n)
}
