//! Precision schedules, the precision-trace data model and its CSV and binary formats.
