//! Evaluator predictions, so that ranking can run from saved output without a model:
//! CSV `instance,system,predicted,p_correct[,prob:<label>...]` or JSONL
//! `{"instance","system","predicted","p_correct","probs":{label: p}}` (detected by content).

use crate::data::common::{
    check_line_ends, check_probability, content_lines, first_content_char, non_empty, nothing_to_read, open_csv,
    parse_number, Tally,
};
use crate::data::controls::Control;
use crate::data::json::parse_record;
use crate::data::{Bundle, Instance, Prediction};
use crate::error::{Error, Result, Warning};
use std::collections::HashMap;

/// How far a prediction's probabilities may sum from 1 (rounding in written files).
pub const PROBABILITY_SUM_TOLERANCE: f64 = 1e-3;

const PROB_PREFIX: &str = "prob:";
const COLUMNS: [&str; 4] = ["instance", "system", "predicted", "p_correct"];

/// Predictions read from a file, with the line of each (for messages in later checks).
#[derive(Debug, Clone, PartialEq)]
pub struct PredictionFile {
    pub name: String,
    pub predictions: Vec<Prediction>,
    /// `lines[i]` is the 1-based line of `predictions[i]`.
    pub lines: Vec<usize>,
}

/// Parses predictions in CSV or JSONL (a first non-blank character `{` means JSONL).
/// Each row is checked on its own: p_correct and every probability in [0, 1], probabilities
/// summing to 1 within [`PROBABILITY_SUM_TOLERANCE`], and no (instance, system) twice.
/// In CSV an empty `prob:<label>` cell means "no probability for that label" (a file that
/// mixes tasks has columns for all their labels); the kept probabilities are in column order.
pub fn parse_predictions(name: &str, text: &str) -> Result<(PredictionFile, Vec<Warning>)> {
    let (file, warnings) =
        if first_content_char(text) == Some('{') { parse_jsonl(name, text)? } else { parse_csv(name, text)? };
    if file.predictions.is_empty() {
        return Err(nothing_to_read(name, text, "no predictions in the file"));
    }
    reject_duplicates(&file.predictions, &|i| Source::Line(name, file.lines[i]))?;
    Ok((file, warnings))
}

fn parse_csv(name: &str, text: &str) -> Result<(PredictionFile, Vec<Warning>)> {
    let (mut reader, header, mut lines) = open_csv(name, text)?;
    let columns = header.require_all(name, &COLUMNS)?;
    let prob_columns: Vec<(usize, String)> = header
        .names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.strip_prefix(PROB_PREFIX).map(|label| (i, label.to_owned())))
        .collect();
    if let Some((i, _)) = prob_columns.iter().find(|(_, label)| label.is_empty()) {
        return Err(Error::input(name, 1, &header.names[*i], "a `prob:` column needs a label"));
    }
    let warnings: Vec<Warning> =
        header.unknown_columns(name, |c| COLUMNS.contains(&c) || c.starts_with(PROB_PREFIX)).into_iter().collect();

    let mut file = PredictionFile { name: name.to_owned(), predictions: Vec::new(), lines: Vec::new() };
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(name, e))?;
        let line = lines.of(&record);
        let field = |i: usize| non_empty(name, line, COLUMNS[i], &record, columns[i]);
        let p_correct = parse_number(name, line, "p_correct", field(3)?)?;
        let mut probs = Vec::new();
        for (column, label) in &prob_columns {
            let cell = record.get(*column).unwrap_or("");
            if !cell.is_empty() {
                let field_name = &header.names[*column];
                let p = parse_number(name, line, field_name, cell)?;
                probs.push((label.clone(), check_probability(name, line, field_name, p)?));
            }
        }
        let prediction = Prediction {
            instance: field(0)?.to_owned(),
            system: field(1)?.to_owned(),
            predicted: field(2)?.to_owned(),
            p_correct: check_probability(name, line, "p_correct", p_correct)?,
            probs,
        };
        check_sum(name, line, &prediction)?;
        file.predictions.push(prediction);
        file.lines.push(line);
    }
    Ok((file, warnings))
}

fn parse_jsonl(name: &str, text: &str) -> Result<(PredictionFile, Vec<Warning>)> {
    check_line_ends(name, text)?;
    let mut file = PredictionFile { name: name.to_owned(), predictions: Vec::new(), lines: Vec::new() };
    let mut unknown = Tally::new(name);
    for (line, text) in content_lines(text) {
        let record = parse_record(name, line, text)?;
        for field in record.unknown_fields(&["instance", "system", "predicted", "p_correct", "probs"]) {
            unknown.add(format!("ignored unknown field `{field}` on lines"), line.to_string());
        }
        let probs = match record.get("probs") {
            Some(_) => record.number_map("probs")?,
            None => Vec::new(),
        };
        for (label, p) in &probs {
            check_probability(name, line, &format!("probs.{label}"), *p)?;
        }
        let prediction = Prediction {
            instance: record.string("instance")?.to_owned(),
            system: record.string("system")?.to_owned(),
            predicted: record.label("predicted")?,
            p_correct: check_probability(name, line, "p_correct", record.number("p_correct")?)?,
            probs,
        };
        check_sum(name, line, &prediction)?;
        file.predictions.push(prediction);
        file.lines.push(line);
    }
    Ok((file, unknown.into_warnings()))
}

/// A row's probabilities, when it gives them, sum to 1 and agree with its predicted label:
/// the prediction is a label of highest probability (within the tolerance, for rounding).
/// A row whose `predicted` contradicts them (probabilities in another label order, a
/// 0-based key beside 1-based labels) would be scored by its label and ranked by its
/// probabilities, two different evaluators.
fn check_sum(name: &str, line: usize, prediction: &Prediction) -> Result<()> {
    if prediction.probs.is_empty() {
        return Ok(());
    }
    let sum: f64 = prediction.probs.iter().map(|(_, p)| p).sum();
    if (sum - 1.0).abs() > PROBABILITY_SUM_TOLERANCE {
        return Err(Error::input(
            name,
            line,
            "probs",
            format!("probabilities sum to {sum}, not 1 (tolerance {PROBABILITY_SUM_TOLERANCE})"),
        ));
    }
    let (top, p_top) =
        prediction
            .probs
            .iter()
            .fold(("", f64::NEG_INFINITY), |(l, m), (label, p)| if *p > m { (label.as_str(), *p) } else { (l, m) });
    let p_predicted = prediction.probs.iter().find(|(l, _)| *l == prediction.predicted).map(|(_, p)| *p);
    if p_predicted.is_none_or(|p| p < p_top - PROBABILITY_SUM_TOLERANCE) {
        let has = match p_predicted {
            Some(p) => format!("has probability {p}"),
            None => "has no probability in this row".to_owned(),
        };
        return Err(Error::input(
            name,
            line,
            "predicted",
            format!(
                "predicted label `{}` {has}, but `{top}` has {p_top}: a prediction is a label of highest probability (within {PROBABILITY_SUM_TOLERANCE}); are the labels or the probabilities shifted?",
                prediction.predicted
            ),
        ));
    }
    Ok(())
}

/// Where a prediction came from: a line of a file, or position `i` of an in-memory list.
enum Source<'a> {
    Line(&'a str, usize),
    Index(usize),
}

impl Source<'_> {
    fn error(&self, field: &str, message: String) -> Error {
        match self {
            Source::Line(file, line) => Error::input(file, *line, field, message),
            Source::Index(i) => Error::invalid(format!("prediction #{} ({field}): {message}", i + 1)),
        }
    }
}

fn reject_duplicates<'a>(predictions: &[Prediction], source: &dyn Fn(usize) -> Source<'a>) -> Result<()> {
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, p) in predictions.iter().enumerate() {
        if let Some(j) = first.insert((p.instance.as_str(), p.system.as_str()), i) {
            let earlier = match source(j) {
                Source::Line(_, line) => format!("line {line}"),
                Source::Index(j) => format!("prediction #{}", j + 1),
            };
            return Err(source(i).error(
                "system",
                format!(
                    "a second prediction for instance `{}` and system `{}` (also at {earlier})",
                    p.instance, p.system
                ),
            ));
        }
    }
    Ok(())
}

/// Checks predictions (e.g. produced in memory by an evaluator) against the bundle they
/// score. Errors: unknown instance, unknown system, a predicted or probability label outside
/// the instance's label set, duplicate (instance, system). Warnings: bundle (instance,
/// system) pairs without a prediction, and `p_correct` that disagrees with the probability of
/// the gold label by more than the tolerance.
pub fn check_predictions_against(predictions: &[Prediction], bundle: &Bundle) -> Result<Vec<Warning>> {
    check(predictions, bundle, "predictions", &|i| Source::Index(i))
}

/// [`check_predictions_against`] for predictions read from a file: errors name its lines.
pub fn check_prediction_file_against(file: &PredictionFile, bundle: &Bundle) -> Result<Vec<Warning>> {
    check(&file.predictions, bundle, &file.name, &|i| Source::Line(&file.name, file.lines[i]))
}

/// Control systems (`controls` adds them) are accepted even though the bundle file does
/// not list them, because their arguments are made at run time.
fn check<'a>(
    predictions: &[Prediction],
    bundle: &Bundle,
    name: &str,
    source: &dyn Fn(usize) -> Source<'a>,
) -> Result<Vec<Warning>> {
    reject_duplicates(predictions, source)?;
    let instances: HashMap<&str, &Instance> = bundle.instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut tally = Tally::new(name);
    for (i, p) in predictions.iter().enumerate() {
        let instance = instances.get(p.instance.as_str()).ok_or_else(|| {
            source(i).error("instance", format!("instance `{}` is not in bundle `{}`", p.instance, bundle.name))
        })?;
        if !bundle.systems.contains(&p.system) && !Control::is_control_name(&p.system) {
            let controls: Vec<&str> = Control::ALL.iter().map(|c| c.system_name()).collect();
            return Err(source(i).error(
                "system",
                format!(
                    "system `{}` is neither in bundle `{}` nor a control case ({})",
                    p.system,
                    bundle.name,
                    controls.join(", ")
                ),
            ));
        }
        let labels = instance.problem.label_set();
        if !labels.contains(&p.predicted) {
            return Err(source(i).error(
                "predicted",
                format!("label `{}` is not a label of instance `{}` ({})", p.predicted, p.instance, labels.join(", ")),
            ));
        }
        for (label, _) in &p.probs {
            if !labels.contains(label) {
                return Err(source(i).error(
                    &format!("prob:{label}"),
                    format!("label `{label}` is not a label of instance `{}` ({})", p.instance, labels.join(", ")),
                ));
            }
        }
        let gold = instance.problem.gold();
        if let Some((_, p_gold)) = p.probs.iter().find(|(l, _)| l == gold) {
            if (p_gold - p.p_correct).abs() > PROBABILITY_SUM_TOLERANCE {
                tally.add(
                    "predictions whose p_correct differs from the probability of the gold label",
                    format!("{}/{}", p.instance, p.system),
                );
            }
        }
    }
    let predicted: std::collections::HashSet<(&str, &str)> =
        predictions.iter().map(|p| (p.instance.as_str(), p.system.as_str())).collect();
    for instance in &bundle.instances {
        for (system, _) in &instance.arguments {
            if !predicted.contains(&(instance.id.as_str(), system.as_str())) {
                tally.add(format!("no prediction for system `{system}` on instances"), instance.id.clone());
            }
        }
    }
    Ok(tally.into_warnings())
}

/// Writes predictions as CSV with one `prob:<label>` column per label that appears (in
/// order of first appearance); cells of labels a row has no probability for stay empty.
/// Numbers use Rust's shortest round-trip form, so reading the file back gives equal values.
pub fn write_predictions_csv(predictions: &[Prediction]) -> String {
    let mut labels: Vec<&str> = Vec::new();
    for p in predictions {
        for (label, _) in &p.probs {
            if !labels.contains(&label.as_str()) {
                labels.push(label);
            }
        }
    }
    let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
    let mut header: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(labels.iter().map(|l| format!("{PROB_PREFIX}{l}")));
    writer.write_record(&header).expect("writing to memory");
    for p in predictions {
        let mut row = vec![p.instance.clone(), p.system.clone(), p.predicted.clone(), p.p_correct.to_string()];
        row.extend(
            labels
                .iter()
                .map(|label| p.probs.iter().find(|(l, _)| l == label).map(|(_, v)| v.to_string()).unwrap_or_default()),
        );
        writer.write_record(&row).expect("writing to memory");
    }
    String::from_utf8(writer.into_inner().expect("writing to memory")).expect("UTF-8 in, UTF-8 out")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::parse_bundle;

    const EXAMPLE: &str = include_str!("../../examples/predictions.csv");
    const BUNDLE: &str = include_str!("../../examples/bundle.jsonl");
    const HEADER: &str = "instance,system,predicted,p_correct,prob:1,prob:2";

    fn error_at(text: &str) -> (usize, Option<String>, String) {
        let err = parse_predictions("p.csv", text).unwrap_err();
        let loc = err.location().expect("located").clone();
        (loc.line.expect("a line"), loc.field, err.to_string())
    }

    fn bundle() -> Bundle {
        parse_bundle("bundle.jsonl", BUNDLE).unwrap().0
    }

    #[test]
    fn example_predictions_cover_every_instance_and_system_including_controls() {
        let (file, warnings) = parse_predictions("predictions.csv", EXAMPLE).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(file.predictions.len(), 20 * 8);
        let first = &file.predictions[0];
        assert_eq!((first.instance.as_str(), first.system.as_str()), ("mcqa-01", "expert"));
        assert_eq!(first.probs.len(), 5, "empty prob cells of other tasks are not probabilities");
        let nli = file.predictions.iter().find(|p| p.instance == "nli-01").unwrap();
        let labels: Vec<&str> = nli.probs.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["entailment", "contradiction"]);
        assert_eq!(check_prediction_file_against(&file, &bundle()).unwrap(), []);
    }

    /// The example is meant for the demo: every control case must score below every real
    /// system, so the robustness check passes on it (accuracy = predicted == gold, counted
    /// by hand from the file: expert 20, gpt-4o 19, openbiollm-70b 14, llama-3-70b 11 of 20;
    /// label_only 10, no_argument 8, ir_passages 7, noise 5).
    #[test]
    fn example_controls_score_below_the_real_systems() {
        let bundle = bundle();
        let (file, _) = parse_predictions("predictions.csv", EXAMPLE).unwrap();
        let correct = |system: &str| {
            file.predictions
                .iter()
                .filter(|p| p.system == system)
                .filter(|p| bundle.instance(&p.instance).unwrap().problem.gold() == p.predicted)
                .count()
        };
        let real: Vec<usize> = bundle.systems.iter().map(|s| correct(s)).collect();
        let controls: Vec<usize> = Control::ALL.iter().map(|c| correct(c.system_name())).collect();
        assert_eq!(real, [20, 19, 11, 14]);
        assert_eq!(controls, [8, 10, 5, 7]);
    }

    #[test]
    fn jsonl_is_detected_by_content() {
        let text = "\n{\"instance\": \"mcqa-01\", \"system\": \"expert\", \"predicted\": 2, \"p_correct\": 0.7, \"probs\": {\"1\": 0.3, \"2\": 0.7}}\n";
        let (file, _) = parse_predictions("p.jsonl", text).unwrap();
        assert_eq!(file.lines, [2]);
        assert_eq!(file.predictions[0].predicted, "2");
        assert_eq!(file.predictions[0].probs, [("1".to_string(), 0.3), ("2".to_string(), 0.7)]);
        let (_, warnings) = parse_predictions(
            "p.jsonl",
            "{\"instance\": \"a\", \"system\": \"s\", \"predicted\": \"1\", \"p_correct\": 1, \"model\": \"m\"}",
        )
        .unwrap();
        assert_eq!(warnings[0].to_string(), "p.jsonl: ignored unknown field `model` on lines: 1 (1)");
        let err = parse_predictions(
            "p.jsonl",
            "{\"instance\": \"a\", \"system\": \"s\", \"predicted\": \"1\", \"p_correct\": 1.5}",
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "p.jsonl:1: field `p_correct`: probability 1.5 is outside [0, 1]");
    }

    #[test]
    fn probability_errors_name_the_column() {
        let (line, field, message) = error_at(&format!("{HEADER}\na,s,1,0.4,0.4,0.5\n"));
        assert_eq!((line, field.as_deref()), (2, Some("probs")));
        assert!(message.ends_with("probabilities sum to 0.9, not 1 (tolerance 0.001)"), "{message}");
        let (line, field, _) = error_at(&format!("{HEADER}\na,s,1,0.4,-0.1,1.1\n"));
        assert_eq!((line, field.as_deref()), (2, Some("prob:1")));
        let (line, field, _) = error_at(&format!("{HEADER}\na,s,1,high,,\n"));
        assert_eq!((line, field.as_deref()), (2, Some("p_correct")));
        // Within the tolerance is fine: 0.3333 + 0.6666 = 0.9999.
        assert!(parse_predictions("p.csv", &format!("{HEADER}\na,s,2,0.6666,0.3333,0.6666\n")).is_ok());
    }

    #[test]
    fn a_predicted_label_that_contradicts_its_probabilities_is_refused() {
        // Label 2 predicted where label 1 has 0.7: scored as a 2, ranked by probabilities
        // that say 1 (a file whose labels and probabilities are shifted reads this way).
        let (line, field, message) = error_at(&format!("{HEADER}\na,s,2,0.6,0.4,0.6\nb,s,2,0.3,0.7,0.3\n"));
        assert_eq!((line, field.as_deref()), (3, Some("predicted")));
        assert!(message.ends_with("predicted label `2` has probability 0.3, but `1` has 0.7: a prediction is a label of highest probability (within 0.001); are the labels or the probabilities shifted?"), "{message}");
        // JSONL, and a predicted label the row gives no probability.
        let row =
            r#"{"instance": "a", "system": "s", "predicted": "3", "p_correct": 0.3, "probs": {"1": 0.7, "2": 0.3}}"#;
        let err = parse_predictions("p.jsonl", row).unwrap_err();
        assert_eq!(err.to_string(), "p.jsonl:1: field `predicted`: predicted label `3` has no probability in this row, but `1` has 0.7: a prediction is a label of highest probability (within 0.001); are the labels or the probabilities shifted?");
        // A tie, or a top label within the tolerance, may be predicted; rows without
        // probabilities say nothing to contradict.
        for row in ["a,s,2,0.5,0.5,0.5", "a,s,1,0.4996,0.4996,0.5004", "a,s,2,0.9,,"] {
            assert!(parse_predictions("p.csv", &format!("{HEADER}\n{row}\n")).is_ok(), "{row}");
        }
    }

    #[test]
    fn duplicate_instance_system_names_both_lines() {
        let (line, field, message) = error_at(&format!("{HEADER}\na,s,1,0.6,0.6,0.4\nb,s,1,0.6,,\na,s,2,0.4,,\n"));
        assert_eq!((line, field.as_deref()), (4, Some("system")));
        assert!(message.ends_with("a second prediction for instance `a` and system `s` (also at line 2)"));
    }

    #[test]
    fn check_against_bundle_reports_unknowns_with_lines() {
        let bundle = bundle();
        let check = |text: &str| {
            let (file, _) = parse_predictions("p.csv", text).unwrap();
            check_prediction_file_against(&file, &bundle)
        };
        let err = check(&format!("{HEADER}\nmcqa-01,expert,2,0.6,,\nmcqa-99,expert,2,0.6,,\n")).unwrap_err();
        assert_eq!(err.location().unwrap().line, Some(3));
        assert_eq!(err.location().unwrap().field.as_deref(), Some("instance"));
        let err = check(&format!("{HEADER}\nmcqa-01,claude,2,0.6,,\n")).unwrap_err();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("system"));
        let err = check(&format!("{HEADER}\nnli-01,expert,2,0.6,,\n")).unwrap_err();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("predicted"));
        assert!(err.to_string().ends_with("label `2` is not a label of instance `nli-01` (entailment, contradiction)"));
        let err =
            check("instance,system,predicted,p_correct,prob:yes,prob:entailment\nnli-01,expert,entailment,1,0,1\n")
                .unwrap_err();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("prob:yes"));

        // In memory (an evaluator's output) the error names the position instead of a line.
        let mut predictions = parse_predictions("p.csv", EXAMPLE).unwrap().0.predictions;
        predictions.push(predictions[3].clone());
        let err = check_predictions_against(&predictions, &bundle).unwrap_err();
        assert_eq!(
            err.to_string(),
            "prediction #161 (system): a second prediction for instance `mcqa-01` and system `openbiollm-70b` (also at prediction #4)"
        );
    }

    #[test]
    fn check_against_bundle_warns_about_gaps_and_inconsistent_p_correct() {
        let text = format!("{HEADER}\nmcqa-01,expert,2,0.9,0.5,0.5\n");
        let (file, _) = parse_predictions("p.csv", &text).unwrap();
        let warnings: Vec<String> =
            check_prediction_file_against(&file, &bundle()).unwrap().iter().map(|w| w.to_string()).collect();
        assert_eq!(
            warnings[0],
            "p.csv: predictions whose p_correct differs from the probability of the gold label: 1 (mcqa-01/expert)"
        );
        // Groups come in order of first occurrence: the three other systems are missing on
        // mcqa-01 already, expert only from mcqa-02 on.
        assert!(warnings[1].starts_with("p.csv: no prediction for system `gpt-4o` on instances: 20 ("));
        assert_eq!(warnings[4], "p.csv: no prediction for system `expert` on instances: 19 (mcqa-02, mcqa-03, mcqa-04, mcqa-05, mcqa-06, mcqa-07, mcqa-08, mcqa-09, mcqa-10, mcqa-11, and 9 more)");
        assert_eq!(warnings.len(), 5);
    }

    #[test]
    fn writer_round_trips() {
        let (file, _) = parse_predictions("predictions.csv", EXAMPLE).unwrap();
        let written = write_predictions_csv(&file.predictions);
        let (again, _) = parse_predictions("predictions.csv", &written).unwrap();
        assert_eq!(again.predictions, file.predictions);
        let odd = vec![Prediction {
            instance: "q, \"1\"".into(),
            system: "s\nx".into(),
            predicted: "2".into(),
            p_correct: 0.1 + 0.2,
            probs: vec![("1".into(), 0.1 + 0.2), ("2".into(), 0.7)],
        }];
        let (again, _) = parse_predictions("p.csv", &write_predictions_csv(&odd)).unwrap();
        assert_eq!(again.predictions, odd, "quoting and shortest round-trip floats");
    }
}
