//! Granary's measurement code, under the `granary` binary's `sim`, `perf`,
//! `testbed` and `dedup` commands: the cache-policy simulator ([`sim`]), the
//! network VIP simulator ([`simvip`]), the
//! chunking savings analysis ([`dedup`]), the
//! ndnperf-style signing throughput tool ([`perf`]), the experiments on the
//! netns testbed and their reports ([`testbed`]), and the SVG/PNG line
//! plots they draw ([`plot`]). It knows nothing of command-line parsing:
//! the binary turns its flags into the parameter structs defined here.

pub mod dedup;
pub mod federation_wan;
pub mod perf;
pub mod plot;
pub mod sim;
pub mod simvip;
pub mod testbed;
