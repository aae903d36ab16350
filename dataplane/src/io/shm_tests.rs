use super::*;

/// Removes a link file and its two doorbells (missing ones are fine).
fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(doorbell_path(path, Side::A));
    let _ = std::fs::remove_file(doorbell_path(path, Side::B));
}

/// A link file in /dev/shm unique to this test, removed (with its doorbells) on drop.
struct TempLink(PathBuf);

impl TempLink {
    fn new(tag: &str) -> TempLink {
        let p = PathBuf::from(format!(
            "/dev/shm/pisa-test-{}-{tag}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        remove(&p);
        TempLink(p)
    }
}

impl Drop for TempLink {
    fn drop(&mut self) {
        remove(&self.0);
    }
}

fn frame(pool: &Pool, cache: &mut LocalCache, bytes: &[u8]) -> Frame {
    copy_in(pool, cache, bytes).expect("a buffer")
}

fn received(pool: &Pool, cache: &mut LocalCache, got: Vec<Frame>) -> Vec<Vec<u8>> {
    got.into_iter()
        .map(|f| {
            let v = pool.bytes(&f.buf)[f.start..f.start + f.len].to_vec();
            cache.free(pool, f.buf);
            v
        })
        .collect()
}

fn readable(fd: RawFd) -> bool {
    let mut p = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    // SAFETY: one live pollfd; no timeout.
    unsafe { libc::poll(p.as_mut_ptr(), 1, 0) };
    p[0].revents & libc::POLLIN != 0
}

#[test]
fn frames_cross_both_ways_in_order() {
    let link = TempLink::new("order");
    let pool = Pool::new(4096, 2048);
    let mut cache = LocalCache::default();
    let mut a = ShmPort::open(&link.0, Side::A).unwrap();
    let mut b = ShmPort::open(&link.0, Side::B).unwrap();
    let mut q: VecDeque<Frame> = (0..100u8)
        .map(|i| frame(&pool, &mut cache, &vec![i; 60 + usize::from(i)]))
        .collect();
    assert_eq!(a.send(&pool, &mut cache, &mut q), (100, 0));
    assert!(q.is_empty());
    assert_eq!(b.pending(), 100);
    let mut got = Vec::new();
    assert_eq!(b.recv(&pool, &mut cache, &mut got, 64), (64, 0));
    assert_eq!(b.recv(&pool, &mut cache, &mut got, 64), (36, 0));
    let got = received(&pool, &mut cache, got);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f, &vec![i as u8; 60 + i]);
    }
    // Nothing went the other way; then one frame does.
    let mut none = Vec::new();
    assert_eq!(a.recv(&pool, &mut cache, &mut none, 64), (0, 0));
    let mut q: VecDeque<Frame> = [frame(&pool, &mut cache, b"reply")].into();
    assert_eq!(b.send(&pool, &mut cache, &mut q), (1, 0));
    let mut got = Vec::new();
    a.recv(&pool, &mut cache, &mut got, 64);
    assert_eq!(received(&pool, &mut cache, got), vec![b"reply".to_vec()]);
}

#[test]
fn a_full_ring_keeps_the_rest_and_takes_more_once_drained() {
    let link = TempLink::new("full");
    let pool = Pool::new(4096, 2048);
    let mut cache = LocalCache::default();
    let mut a = ShmPort::open(&link.0, Side::A).unwrap();
    let mut b = ShmPort::open(&link.0, Side::B).unwrap();
    let n = SLOTS as usize + 10;
    let mut q: VecDeque<Frame> = (0..n)
        .map(|i| frame(&pool, &mut cache, &(i as u32).to_be_bytes()))
        .collect();
    assert_eq!(a.send(&pool, &mut cache, &mut q), (SLOTS as usize, 0));
    assert_eq!(q.len(), 10);
    let mut got = Vec::new();
    b.recv(&pool, &mut cache, &mut got, 5);
    assert_eq!(a.send(&pool, &mut cache, &mut q), (5, 0));
    assert_eq!(q.len(), 5);
    while b.pending() > 0 {
        b.recv(&pool, &mut cache, &mut got, 64);
    }
    let got = received(&pool, &mut cache, got);
    assert_eq!(got.len(), SLOTS as usize + 5);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f, &(i as u32).to_be_bytes(), "frame {i}");
    }
    for f in q {
        cache.free(&pool, f.buf);
    }
}

#[test]
fn an_oversize_frame_is_dropped_and_counted() {
    let link = TempLink::new("big");
    let pool = Pool::new(64, 4096);
    let mut cache = LocalCache::default();
    let mut a = ShmPort::open(&link.0, Side::A).unwrap();
    let b = ShmPort::open(&link.0, Side::B).unwrap();
    let mut q: VecDeque<Frame> = [
        frame(&pool, &mut cache, &[1; MAX_FRAME + 1]),
        frame(&pool, &mut cache, &[2; MAX_FRAME]),
    ]
    .into();
    assert_eq!(a.send(&pool, &mut cache, &mut q), (1, 1));
    assert_eq!(b.pending(), 1);
}

#[test]
fn a_sleeping_side_is_woken_once_and_a_busy_one_not_at_all() {
    let link = TempLink::new("bell");
    let pool = Pool::new(256, 2048);
    let mut cache = LocalCache::default();
    let mut a = ShmPort::open(&link.0, Side::A).unwrap();
    let mut b = ShmPort::open(&link.0, Side::B).unwrap();
    // Not armed: a send rings nothing.
    let mut q: VecDeque<Frame> = [frame(&pool, &mut cache, b"x")].into();
    a.send(&pool, &mut cache, &mut q);
    assert!(!readable(b.fd()));
    // Armed with a frame waiting: no sleep.
    assert!(!b.arm());
    let mut got = Vec::new();
    b.recv(&pool, &mut cache, &mut got, 64);
    // Armed on an empty ring: the next send rings, once.
    assert!(b.arm());
    let mut q: VecDeque<Frame> = [
        frame(&pool, &mut cache, b"y"),
        frame(&pool, &mut cache, b"z"),
    ]
    .into();
    a.send(&pool, &mut cache, &mut q);
    assert!(readable(b.fd()));
    let mut q: VecDeque<Frame> = [frame(&pool, &mut cache, b"w")].into();
    a.send(&pool, &mut cache, &mut q);
    b.disarm(true);
    assert!(!readable(b.fd()), "one byte per sleep, drained by disarm");
    b.recv(&pool, &mut cache, &mut got, 64);
    assert_eq!(received(&pool, &mut cache, got).len(), 4);
    // The other direction has its own doorbell.
    assert!(!readable(a.fd()));
}

#[test]
fn a_file_of_another_kind_is_refused() {
    let link = TempLink::new("bad");
    std::fs::write(&link.0, b"not a link").unwrap();
    let e = ShmPort::open(&link.0, Side::A).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    std::fs::write(&link.0, vec![0u8; FILE_LEN]).unwrap();
    let e = ShmPort::open(&link.0, Side::A).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
}

#[test]
fn a_corrupt_producer_index_is_skipped_not_followed() {
    use std::os::unix::fs::FileExt;
    let link = TempLink::new("corrupt");
    let pool = Pool::new(256, 2048);
    let mut cache = LocalCache::default();
    let mut a = ShmPort::open(&link.0, Side::A).unwrap();
    let mut b = ShmPort::open(&link.0, Side::B).unwrap();
    // A misbehaving peer publishes a producer index far beyond the ring.
    let f = OpenOptions::new().write(true).open(&link.0).unwrap();
    f.write_at(&(SLOTS * 3).to_ne_bytes(), (ctrl(0) + PROD) as u64)
        .unwrap();
    let mut got = Vec::new();
    // Skipped and counted with the dropped frames (the port's errors).
    assert_eq!(
        b.recv(&pool, &mut cache, &mut got, 64),
        (0, SLOTS as usize * 3)
    );
    // A slot with a length beyond the slot is dropped, not read.
    f.write_at(
        &u32::MAX.to_ne_bytes(),
        (HEADER) as u64 + u64::from(SLOTS * 3 % SLOTS) * SLOT_SIZE as u64,
    )
    .unwrap();
    f.write_at(&(SLOTS * 3 + 1).to_ne_bytes(), (ctrl(0) + PROD) as u64)
        .unwrap();
    assert_eq!(b.recv(&pool, &mut cache, &mut got, 64), (0, 1));
    // The link still works afterwards (A's producer index is the shared one).
    let mut q: VecDeque<Frame> = [frame(&pool, &mut cache, b"ok")].into();
    assert_eq!(a.send(&pool, &mut cache, &mut q), (1, 0));
    b.recv(&pool, &mut cache, &mut got, 64);
    assert_eq!(received(&pool, &mut cache, got), vec![b"ok".to_vec()]);
}

#[test]
fn specs_parse() {
    assert_eq!(
        parse_spec("shm:/dev/shm/x:a"),
        Some(Ok((PathBuf::from("/dev/shm/x"), Side::A)))
    );
    assert_eq!(
        parse_spec("shm:/dev/shm/x:y:b"),
        Some(Ok((PathBuf::from("/dev/shm/x:y"), Side::B)))
    );
    assert!(parse_spec("shm:/dev/shm/x").unwrap().is_err());
    assert!(parse_spec("shm::a").unwrap().is_err());
    assert_eq!(parse_spec("veth1"), None);
}
