//! `-json`: one JSON object per event and line (`EventLine`: the event and the format version),
//! flushed at once so a reader can follow live.

use super::{ApplyEvent, EventLine, EventSink};
use std::io::Write;

pub struct JsonSink<W: Write + Send> {
    out: W,
}

impl<W: Write + Send> JsonSink<W> {
    pub fn new(out: W) -> Self {
        JsonSink { out }
    }
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write + Send> EventSink for JsonSink<W> {
    fn event(&mut self, event: &ApplyEvent) {
        // Serializing our own plain types cannot fail; a closed stdout only loses the line.
        if let Ok(line) = serde_json::to_string(&EventLine::new(event)) {
            let _ = writeln!(self.out, "{line}");
            let _ = self.out.flush();
        }
    }
}
