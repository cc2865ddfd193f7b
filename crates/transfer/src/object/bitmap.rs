//! A bitmap of segments.

/// A simple bitmap of segments.
#[derive(Debug, Clone)]
pub struct Bitmap(Vec<u64>);

impl Bitmap {
    /// All clear.
    pub fn new(n: u64) -> Bitmap {
        Bitmap(vec![0; n.div_ceil(64) as usize])
    }
    /// Tests bit `i`.
    pub fn get(&self, i: u64) -> bool {
        self.0
            .get((i / 64) as usize)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }
    /// Sets bit `i`.
    pub fn set(&mut self, i: u64) {
        if let Some(w) = self.0.get_mut((i / 64) as usize) {
            *w |= 1 << (i % 64);
        }
    }
}
