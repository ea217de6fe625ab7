//! Event sinks: human progress, JSON lines; colour only on a TTY, honouring NO_COLOR.
