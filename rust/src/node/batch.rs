//! [`Batch`]: record values packed end to end in one buffer. What
//! `send_many` and the Arrow path hand to a producer's thread, and what the
//! producer holds until stores ACK: one allocation per batch instead of one
//! per record, freed by one thread.

/// Record values packed end to end: `data` holds them in order, `ends[i]` is
/// where value `i` ends (value `i` starts where value `i - 1` ends, or at 0).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Batch {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Room for `records` values of `bytes` in all.
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        Self {
            data: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(records),
        }
    }

    /// The values of an Arrow binary/string array: `bounds` are its `n + 1`
    /// value offsets into `values`. One copy of the bytes they span. Errors
    /// name the first offsets that go backwards or past `values`.
    pub fn from_offsets(
        values: &[u8],
        bounds: impl IntoIterator<Item = i64>,
    ) -> std::result::Result<Self, String> {
        let mut bounds = bounds.into_iter();
        let Some(mut prev) = bounds.next() else {
            return Ok(Self::new());
        };
        let pos = |b: i64| usize::try_from(b).ok().filter(|&p| p <= values.len());
        let mut ends = Vec::with_capacity(bounds.size_hint().0);
        let mut start = None;
        for b in bounds {
            match (pos(prev), pos(b)) {
                (Some(from), Some(to)) if from <= to => {
                    let s = *start.get_or_insert(from);
                    ends.push(to - s);
                }
                _ => {
                    return Err(format!(
                        "offsets must be non-decreasing and within the {}-byte data \
                         buffer, got [{prev}, {b})",
                        values.len()
                    ))
                }
            }
            prev = b;
        }
        let start = start.unwrap_or(0);
        let stop = start + ends.last().copied().unwrap_or(0);
        Ok(Self {
            data: values[start..stop].to_vec(),
            ends,
        })
    }

    /// Appends the body of a record ([`crate::meta`]): its metadata, then
    /// its value (one copy).
    pub fn push_body<N: AsRef<str>, V: AsRef<[u8]>>(
        &mut self,
        create_time: u64,
        key: Option<&[u8]>,
        headers: &[(N, V)],
        value: &[u8],
    ) {
        crate::meta::encode(&mut self.data, create_time, key, headers);
        self.data.extend_from_slice(value);
        self.ends.push(self.data.len());
    }

    /// Appends the body of a record with neither key nor headers.
    pub fn push_plain(&mut self, create_time: u64, value: &[u8]) {
        crate::meta::encode_plain(&mut self.data, create_time);
        self.data.extend_from_slice(value);
        self.ends.push(self.data.len());
    }

    /// The bodies of `values`, each with neither key nor headers, created
    /// at `create_time`.
    pub fn plain_bodies<T: AsRef<[u8]>>(
        values: impl IntoIterator<Item = T>,
        create_time: u64,
    ) -> Self {
        let mut b = Batch::new();
        for v in values {
            b.push_plain(create_time, v.as_ref());
        }
        b
    }

    /// Appends one value (a copy).
    pub fn push(&mut self, value: &[u8]) {
        self.data.extend_from_slice(value);
        self.ends.push(self.data.len());
    }

    /// Drops every value, keeping the room (a buffer reused turn after turn).
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    /// Keeps the first `n` values (all if there are fewer).
    pub fn truncate(&mut self, n: usize) {
        if n < self.len() {
            self.data.truncate(self.start(n));
            self.ends.truncate(n);
        }
    }

    /// Gives back room allocated beyond what the values use (more than a
    /// quarter of it): for a batch held a while, e.g. until stores ACK.
    pub fn shrink(&mut self) {
        if self.data.capacity() - self.data.len() > self.data.len() / 4 {
            self.data.shrink_to_fit();
        }
        if self.ends.capacity() - self.ends.len() > self.ends.len() / 4 {
            self.ends.shrink_to_fit();
        }
    }

    /// Bytes allocated for values and their ends.
    pub fn allocated(&self) -> usize {
        self.data.capacity() + self.ends.capacity() * std::mem::size_of::<usize>()
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of all values.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    fn start(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            Some(j) => self.ends[j],
            None => 0,
        }
    }

    /// Value `i` (`i < len()`).
    fn value(&self, i: usize) -> &[u8] {
        &self.data[self.start(i)..self.ends[i]]
    }

    /// Value `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| self.value(i))
    }

    /// Bytes of values `from..to`.
    pub fn span(&self, from: usize, to: usize) -> usize {
        if from >= to {
            return 0;
        }
        self.ends[to - 1] - self.start(from)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.value(i))
    }

    /// Pieces of at most `max` bytes each (a value larger than `max` goes
    /// alone), in order. A batch that fits is returned as it is, uncopied.
    pub fn split(self, max: usize) -> Vec<Batch> {
        if self.bytes() <= max {
            return vec![self];
        }
        let mut out = Vec::new();
        let mut from = 0;
        while from < self.len() {
            let mut to = from + 1;
            while to < self.len() && self.span(from, to + 1) <= max {
                to += 1;
            }
            let mut piece = Batch::with_capacity(to - from, self.span(from, to));
            for i in from..to {
                piece.push(self.value(i));
            }
            out.push(piece);
            from = to;
        }
        out
    }
}

/// One value, not copied.
impl From<Vec<u8>> for Batch {
    fn from(value: Vec<u8>) -> Self {
        let ends = vec![value.len()];
        Self { data: value, ends }
    }
}

impl<T: AsRef<[u8]>> FromIterator<T> for Batch {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        let mut b = Batch::new();
        for v in values {
            b.push(v.as_ref());
        }
        b
    }
}

#[cfg(test)]
mod tests;
