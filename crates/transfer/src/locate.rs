//! Location-driven forwarding hints: when a fetch by name finds no route (a NoRoute
//! Nack) or no answer, the engine asks a [`Locator`] which nodes hold the object and
//! sends its Interests with the first node's prefix as ForwardingHint; when those fail
//! too, it switches to the next node. Only the hint changes: the jobs keep what they
//! have verified and ask only for what they still lack.
//!
//! The transfer crate knows no catalog: the locator is given by the caller (the
//! command line asks the node's catalog over NDN, or the shared PostgreSQL catalog).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

use granary_packet::types::COMP_GENERIC;
use granary_packet::Name;

/// What a lookup gives: the node prefixes to try, best first, or why there are none.
pub type Located = Result<Vec<Name>, String>;

/// A lookup in progress.
pub type LocateFuture = Pin<Box<dyn Future<Output = Located> + Send>>;

/// Finds the nodes that hold an object.
pub trait Locator: Send + Sync {
    /// The node prefixes holding `object` (a name without version or segment: the
    /// leading generic components of the requests' names), to be tried in order.
    fn locate(&self, object: &Name) -> LocateFuture;
}

/// The object a request belongs to: its name up to the first component that is not
/// generic (the version, a segment, `32=metadata`, …).
pub(crate) fn object_of(name: &Name) -> Name {
    let n = name
        .components()
        .take_while(|c| c.typ == COMP_GENERIC)
        .count();
    name.prefix(n as isize)
}

/// The hint state of one object.
#[derive(Default)]
pub(crate) struct Hints {
    /// The hint Interests carry now (empty: by name).
    pub current: Vec<Name>,
    /// Locations not tried yet.
    pub next: VecDeque<Name>,
    /// Bumped at every switch: a failure of an Interest sent under an older hint
    /// only sends it again, under the current one.
    pub gen: u64,
    /// The lookup was made.
    pub looked_up: bool,
}
