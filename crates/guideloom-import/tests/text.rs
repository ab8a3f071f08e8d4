//! CSV and JSON Lines in: schemas inferred or given, records imported and read back, and a
//! record that does not parse named by its file and line (wherever it falls in a batch).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use guideloom::{PublishMode, Publisher};
use guideloom_arrow::BatchDecoder;
use guideloom_import::Error;
use guideloom_import::sink::{ImportOptions, ImportSink, publish};
use guideloom_import::text::{TextFormat, TextInput, TextOptions};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn options(batch_rows: usize, infer_rows: usize) -> TextOptions {
    TextOptions {
        batch_rows,
        infer_rows,
        schema: None,
    }
}

/// All batches of `input`, or the first error.
fn read_all(input: &TextInput) -> guideloom_import::Result<Vec<RecordBatch>> {
    input.batches().collect()
}

/// The line an [`Error::Parse`] names (panics on another error).
fn parse_line(err: &Error, path: &Path) -> u64 {
    match err {
        Error::Parse { path: p, line, .. } => {
            assert_eq!(p, path, "{err}");
            *line
        }
        other => panic!("expected a parse error, got {other}"),
    }
}

#[test]
fn csv_is_inferred_imported_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "a.csv",
        "id,name,score\n1,alpha,0.5\n2,\"beta, with comma\",\n3,\"multi\nline\",2.25\n4,,-1\n",
    );
    let input = TextInput::open(
        TextFormat::Csv,
        std::slice::from_ref(&path),
        options(2, 100),
    )
    .unwrap();
    let fields: Vec<String> = input
        .schema()
        .fields
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(fields, ["id: int64?", "name: utf8?", "score: float64?"]);

    let publisher = Publisher::open("memory://text-csv-round-trip").unwrap();
    let mut sink = ImportSink::new(
        publisher.clone(),
        input.schema().clone(),
        ImportOptions::new("w"),
    )
    .unwrap();
    sink.write(input.batches()).unwrap();
    assert_eq!(input.bytes_read(), input.input_bytes());
    let imported = sink.finish();
    assert_eq!(imported.records, 4);
    publish(
        &publisher,
        "ds",
        "v1",
        imported.shards,
        PublishMode::Full,
        input.schema().clone(),
    )
    .unwrap();

    let ds = publisher.dataset().unwrap();
    let mut decoder = BatchDecoder::new(input.schema()).unwrap();
    for record in ds.get_many(&[0, 1, 2, 3]).unwrap() {
        decoder.push(&record).unwrap();
    }
    let got = decoder.finish().unwrap();
    let expected = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("score", DataType::Float64, true),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
            Arc::new(StringArray::from(vec![
                Some("alpha"),
                Some("beta, with comma"),
                Some("multi\nline"),
                None,
            ])),
            Arc::new(Float64Array::from(vec![
                Some(0.5),
                None,
                Some(2.25),
                Some(-1.0),
            ])),
        ],
    )
    .unwrap();
    assert_eq!(got, expected);
}

#[test]
fn a_csv_value_that_does_not_parse_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    // Line 1 header; a quoted field spans lines 3-4; the bad value is on line 9, in the third
    // batch of two records (past the 3 records the schema is inferred from).
    let text = "id,note\n1,a\n2,\"two\nlines\"\n3,c\n4,d\n\n5,e\nsix,f\n7,g\n";
    let path = write(dir.path(), "bad.csv", text);
    let input =
        TextInput::open(TextFormat::Csv, std::slice::from_ref(&path), options(2, 3)).unwrap();
    let err = read_all(&input).unwrap_err();
    assert_eq!(parse_line(&err, &path), 9, "{err}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}:9: ", path.display())),
        "{message}"
    );
    assert!(message.contains("six"), "{message}");
    assert!(
        !message.contains("at line"),
        "no decoder line count: {message}"
    );

    // The same with CRLF line ends and one batch for everything.
    let crlf = write(dir.path(), "crlf.csv", &text.replace('\n', "\r\n"));
    let input = TextInput::open(
        TextFormat::Csv,
        std::slice::from_ref(&crlf),
        options(100, 3),
    )
    .unwrap();
    assert_eq!(parse_line(&read_all(&input).unwrap_err(), &crlf), 9);
}

#[test]
fn a_csv_record_with_a_missing_column_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "short.csv", "a,b\n1,2\n3,4\n5\n7,8\n");
    let input =
        TextInput::open(TextFormat::Csv, std::slice::from_ref(&path), options(1, 2)).unwrap();
    let err = read_all(&input).unwrap_err();
    assert_eq!(parse_line(&err, &path), 4, "{err}");
}

#[test]
fn a_second_csv_file_with_other_columns_is_refused_at_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.csv", "x,y\n1,2\n");
    let b = write(dir.path(), "b.csv", "y,x\n1,2\n");
    let input = TextInput::open(TextFormat::Csv, &[a, b.clone()], options(10, 10)).unwrap();
    assert_eq!(parse_line(&read_all(&input).unwrap_err(), &b), 1);
}

#[test]
fn jsonl_is_inferred_and_read_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..25 {
        text.push_str(&format!(
            "{{\"id\": {i}, \"tags\": [\"t{i}\"], \"meta\": {{\"ok\": {}}}, \"none\": null}}\n",
            i % 2 == 0
        ));
    }
    let path = write(dir.path(), "a.jsonl", &text);
    let input = TextInput::open(
        TextFormat::JsonLines,
        std::slice::from_ref(&path),
        options(4, 10),
    )
    .unwrap();
    let fields: Vec<String> = input
        .schema()
        .fields
        .iter()
        .map(|f| f.to_string())
        .collect();
    assert_eq!(
        fields,
        [
            "id: int64?",
            "tags: list<utf8>?",
            "meta: struct<ok: bool?>?",
            "none: utf8?"
        ]
    );
    let batches = read_all(&input).unwrap();
    assert_eq!(batches.len(), 7);
    let ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            ids.values().to_vec()
        })
        .collect();
    assert_eq!(ids, (0..25).collect::<Vec<_>>());
    assert!(
        batches
            .iter()
            .all(|b| b.column(3).null_count() == b.num_rows())
    );
}

#[test]
fn a_jsonl_line_that_does_not_parse_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = |i: usize| format!("{{\"a\": {i}, \"b\": \"x{i}\"}}\n");
    let lines = |bad: &str| {
        let mut text = String::new();
        for i in 0..7 {
            text.push_str(&good(i));
        }
        text.push('\n'); // line 8: blank
        text.push_str(&good(8));
        text.push_str(bad); // line 10
        text.push('\n');
        text.push_str(&good(11));
        text
    };
    for (name, bad, says) in [
        ("type.jsonl", r#"{"a": "ten", "b": "x"}"#, "ten"),
        ("syntax.jsonl", r#"{"a": 10, "b": }"#, ""),
        ("unknown.jsonl", r#"{"a": 10, "b": "x", "c": 1}"#, "c"),
        ("truncated.jsonl", r#"{"a": 10, "b": "x""#, ""),
    ] {
        let path = write(dir.path(), name, &lines(bad));
        for batch_rows in [1, 3, 100] {
            let input = TextInput::open(
                TextFormat::JsonLines,
                std::slice::from_ref(&path),
                options(batch_rows, 5),
            )
            .unwrap();
            let err = read_all(&input).unwrap_err();
            assert_eq!(
                parse_line(&err, &path),
                10,
                "{name}, batches of {batch_rows}: {err}"
            );
            assert!(err.to_string().contains(says), "{name}: {err}");
        }
    }
}

#[test]
fn a_malformed_line_among_the_inferred_ones_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "early.jsonl",
        "{\"a\": 1}\n{\"a\": 2}\n{\"a\": \n{\"a\": 4}\n",
    );
    let err = TextInput::open(
        TextFormat::JsonLines,
        std::slice::from_ref(&path),
        options(10, 10),
    )
    .unwrap_err();
    assert_eq!(parse_line(&err, &path), 3, "{err}");
}

#[test]
fn a_given_schema_is_used_and_an_unstored_type_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.csv", "n\n1\n2\n");
    let given = Arc::new(ArrowSchema::new(vec![Field::new(
        "n",
        DataType::UInt8,
        false,
    )]));
    let input = TextInput::open(
        TextFormat::Csv,
        std::slice::from_ref(&path),
        TextOptions {
            schema: Some(given),
            ..TextOptions::default()
        },
    )
    .unwrap();
    assert_eq!(input.schema().fields[0].to_string(), "n: uint8");
    let batches = read_all(&input).unwrap();
    assert_eq!(batches[0].num_rows(), 2);

    let decimal = Arc::new(ArrowSchema::new(vec![Field::new(
        "n",
        DataType::Decimal128(5, 1),
        true,
    )]));
    let err = TextInput::open(
        TextFormat::Csv,
        std::slice::from_ref(&path),
        TextOptions {
            schema: Some(decimal),
            ..TextOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(err.to_string().contains("a.csv"), "{err}");
}
