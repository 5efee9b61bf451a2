//! One DMA queue's free time, for the scheduler's transfer placement.

/// When one DMA queue is free: the idle gaps between the transfers placed on it (each with
/// the slice that ends just before it), and when its last transfer ends. Placing a transfer
/// looks at the gaps after its ready time only, and a gap shorter than the program's shortest
/// transfer is forgotten, so placement stays cheap however many transfers a queue has run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Queue {
    /// `(start, end, slice before)`, sorted and disjoint.
    gaps: Vec<(f64, f64, Option<usize>)>,
    /// When the last transfer ends, and its slice.
    tail: (f64, Option<usize>),
}

impl Queue {
    /// The earliest start at or after `ready` where `duration` fits, and the slice it waits
    /// for (when it cannot start at `ready`).
    pub(crate) fn earliest(&self, ready: f64, duration: f64) -> (f64, Option<usize>) {
        let first = self.gaps.partition_point(|&(_, end, _)| end <= ready);
        for &(start, end, before) in &self.gaps[first..] {
            let at = start.max(ready);
            if at + duration <= end {
                return (at, if at > ready { before } else { None });
            }
        }
        let (tail, by) = self.tail;
        if tail > ready {
            (tail, by)
        } else {
            (ready, None)
        }
    }

    /// Marks `start..end` busy with `slice` (a place [`Queue::earliest`] returned).
    pub(crate) fn occupy(&mut self, start: f64, end: f64, slice: usize, min_gap: f64) {
        let useful = |lo: f64, hi: f64| lo + min_gap <= hi && lo < hi;
        if start >= self.tail.0 {
            if useful(self.tail.0, start) {
                self.gaps.push((self.tail.0, start, self.tail.1));
            }
            self.tail = (end, Some(slice));
            return;
        }
        let at = self.gaps.partition_point(|&(_, e, _)| e <= start);
        let Some(&(lo, hi, before)) = self.gaps.get(at) else {
            return; // not a place `earliest` returned
        };
        self.gaps.remove(at);
        let mut pieces = Vec::with_capacity(2);
        if useful(lo, start) {
            pieces.push((lo, start, before));
        }
        if useful(end, hi) {
            pieces.push((end, hi, Some(slice)));
        }
        self.gaps.splice(at..at, pieces);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_fill_gaps_after_their_ready_time_and_small_gaps_are_forgotten() {
        let mut q = Queue::default();
        assert_eq!(q.earliest(5.0, 2.0), (5.0, None));
        q.occupy(5.0, 7.0, 0, 1.0); // gap 0..5 before it
        assert_eq!(q.earliest(0.0, 2.0), (0.0, None));
        assert_eq!(q.earliest(4.0, 2.0), (7.0, Some(0))); // 4..6 overlaps: after slice 0
        q.occupy(0.0, 4.5, 1, 1.0); // leaves 4.5..5, shorter than any transfer: forgotten
        assert!(q.gaps.is_empty());
        assert_eq!(q.earliest(0.0, 1.0), (7.0, Some(0)));
        q.occupy(10.0, 11.0, 2, 1.0);
        assert_eq!(q.earliest(0.0, 3.0), (7.0, Some(0)));
        assert_eq!(q.earliest(0.0, 3.5), (11.0, Some(2)));
        q.occupy(7.0, 8.0, 3, 1.0);
        assert_eq!(q.gaps, vec![(8.0, 10.0, Some(3))]);
    }
}
