//! A frame inside a buffer with headroom, modified in place.
//!
//! Programs push and pop headers at the front (packet-in/out headers, tunnel shims) without copying
//! the payload: the buffer keeps spare bytes before the frame. No method here panics.

/// A frame occupying `buf[start..end]`.
#[derive(Debug)]
pub struct Frame<'a> {
    buf: &'a mut [u8],
    start: usize,
    end: usize,
}

impl<'a> Frame<'a> {
    /// The frame `buf[start..start + len]`; the bounds are clamped to the buffer.
    pub fn new(buf: &'a mut [u8], start: usize, len: usize) -> Self {
        let start = start.min(buf.len());
        let end = start.saturating_add(len).min(buf.len());
        Frame { buf, start, end }
    }

    /// The frame's bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The frame's bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    /// Frame length.
    #[inline]
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether the frame is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// Offset of the frame in its buffer.
    #[inline]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Spare bytes before the frame.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// Grows the frame by `n` bytes at the front; returns them, or `None` without enough headroom.
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.start {
            return None;
        }
        self.start -= n;
        Some(&mut self.buf[self.start..self.start + n])
    }

    /// Spare bytes after the frame.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.buf.len() - self.end
    }

    /// Grows the frame by `n` bytes at the end; returns them, or `None` without enough room
    /// after it.
    pub fn push_back(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.tailroom() {
            return None;
        }
        let old = self.end;
        self.end += n;
        Some(&mut self.buf[old..self.end])
    }

    /// Removes `n` bytes from the front; false (and no change) if the frame is shorter.
    pub fn pop_front(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        self.start += n;
        true
    }

    /// Shortens the frame to `len` bytes (no effect if already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.end = self.start + len;
        }
    }
}

/// An owned frame buffer with headroom: for tests, the simulator and replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedFrame {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl OwnedFrame {
    /// Headroom given to owned frames.
    pub const HEADROOM: usize = 64;

    /// A copy of `bytes` with [`OwnedFrame::HEADROOM`] spare bytes in front.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let mut buf = vec![0; Self::HEADROOM + bytes.len()];
        buf[Self::HEADROOM..].copy_from_slice(bytes);
        OwnedFrame {
            buf,
            start: Self::HEADROOM,
            end: Self::HEADROOM + bytes.len(),
        }
    }

    /// The frame's bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// A borrowed view; after using it, call [`OwnedFrame::sync`] with its bounds.
    pub fn with_frame<R>(&mut self, f: impl FnOnce(&mut Frame<'_>) -> R) -> R {
        let mut frame = Frame {
            buf: &mut self.buf,
            start: self.start,
            end: self.end,
        };
        let r = f(&mut frame);
        let (start, end) = (frame.start, frame.end);
        self.start = start;
        self.end = end;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_truncate_never_panic() {
        let mut buf = [0u8; 16];
        let mut f = Frame::new(&mut buf, 4, 8);
        assert_eq!(f.len(), 8);
        assert!(f.push_front(5).is_none());
        f.push_front(4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(f.len(), 12);
        assert_eq!(&f.data()[..4], &[1, 2, 3, 4]);
        assert!(!f.pop_front(13));
        assert!(f.pop_front(12));
        assert!(f.is_empty());
        f.truncate(3);
        assert!(f.is_empty());
        let f = Frame::new(&mut buf, 100, 100);
        assert!(f.is_empty());
    }

    #[test]
    fn owned_frame_tracks_bounds() {
        let mut o = OwnedFrame::from_bytes(&[9, 9]);
        o.with_frame(|f| f.push_front(1).unwrap()[0] = 7);
        assert_eq!(o.data(), &[7, 9, 9]);
    }
}
