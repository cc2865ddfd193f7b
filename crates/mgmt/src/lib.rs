//! NFD management protocol (in progress).
