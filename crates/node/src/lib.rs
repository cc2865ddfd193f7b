//! What every `granary` command shares about the node it runs on: who the
//! node is ([`identity`]), the science catalog it keeps ([`catalog`]),
//! talking to its running daemon ([`control`]), changing its repository
//! from outside the daemon ([`repo`]), what `get` does with the local
//! repository ([`fetched`]), asking the catalog ([`query`]), `publish-dir`'s
//! per-file work ([`publish_dir`]), and the daemon itself ([`daemon`], with
//! its HTTP gateway in [`gateway`], its config file in [`config`] and the
//! federation-wide settings it follows in [`settings`]). The commands' work
//! beyond parsing and printing is here too: fetching ([`fetch`]), management requests
//! ([`mgmt`]), scrub and repair ([`scrub`]), the federation's status and
//! check ([`federation`]), replica placement ([`placement`]), the mount's
//! publisher ([`mount`]), packet dissection ([`dissect`]); the binary reaches the store, transfer and
//! repository crates only through this one. It knows nothing of
//! command-line parsing: the binary turns its flags into the plain values
//! taken here.

pub mod catalog;
pub mod config;
pub mod control;
pub mod daemon;
pub mod dissect;
pub mod federation;
pub mod fetch;
pub mod fetched;
pub mod gateway;
pub mod identity;
pub mod keys;
pub mod local_files;
pub mod locate;
pub mod mgmt;
pub mod mount;
pub mod placement;
pub mod policy;
pub mod publish_dir;
pub mod query;
pub mod replicate;
pub mod repo;
pub mod scrub;
pub mod selfcheck;
pub mod settings;
