//! The one system call the safe libraries do not wrap: how many bytes a
//! socket's kernel send queue holds (SIOCOUTQ, the same number as
//! TIOCOUTQ), which NFD adds to a stream face's queue for congestion
//! marking.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// Bytes in the kernel send queue of the socket `fd` (for a Unix stream
/// socket: written and not yet read by the peer; for TCP: not yet
/// acknowledged). `None` when the kernel refuses (not a socket, closed).
pub(crate) fn outq(fd: BorrowedFd<'_>) -> Option<u64> {
    ioctl_int(fd, libc::TIOCOUTQ)
}

/// Bytes a TCP socket holds that it has not sent yet (SIOCOUTQNSD): the
/// queue behind TCP's own window, without the bytes in flight.
pub(crate) fn outq_unsent(fd: BorrowedFd<'_>) -> Option<u64> {
    ioctl_int(fd, libc::SIOCOUTQNSD as libc::Ioctl)
}

fn ioctl_int(fd: BorrowedFd<'_>, request: libc::Ioctl) -> Option<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: `fd` is a borrowed, therefore open, descriptor for the whole
    // call (the borrow outlives it); both requests used here (TIOCOUTQ, the
    // same as SIOCOUTQ, and SIOCOUTQNSD) write exactly one `int` through
    // their argument, and `&mut n` points to a live,
    // aligned `c_int` owned by this frame. No other memory is touched; on a
    // descriptor that is not a socket the kernel returns an error and writes
    // nothing.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut n as *mut libc::c_int) };
    (rc == 0 && n >= 0).then_some(n as u64)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn counts_what_the_peer_has_not_read() {
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(super::outq(a.as_fd()), Some(0));
        a.write_all(&[7u8; 10_000]).unwrap();
        // On a Unix socket the kernel counts the buffers' true size (the
        // bytes and their bookkeeping), as NFD sees it too.
        let q = super::outq(a.as_fd()).unwrap();
        assert!((10_000..20_000).contains(&q), "{q}");
        let mut got = vec![0u8; 10_000];
        b.read_exact(&mut got).unwrap();
        assert_eq!(super::outq(a.as_fd()), Some(0), "read by the peer");
        let f = tempfile::tempfile().unwrap();
        assert_eq!(super::outq(f.as_fd()), None, "a file is not a socket");
        assert_eq!(super::outq_unsent(f.as_fd()), None);
    }

    #[test]
    fn tcp_unsent_bytes_exclude_what_is_in_flight() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_b, _) = l.accept().unwrap();
        assert_eq!(super::outq_unsent(a.as_fd()), Some(0));
        // Over loopback everything is sent at once (the peer's receive
        // buffer takes it): nothing unsent, though nothing was read.
        a.write_all(&[1u8; 1000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(super::outq_unsent(a.as_fd()), Some(0));
    }
}
