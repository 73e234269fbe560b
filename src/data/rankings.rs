//! Human rankings: CSV in long form, `instance,annotator,system,rank` (1 = best).
//! The same reader serves the NRP expert rankings (instance = qid, system = item id).

use crate::data::common::{non_empty, nothing_to_read, open_csv, parse_number, Tally};
use crate::data::{Bundle, HumanRank, HumanRankings, Instance};
use crate::error::{Error, Result, Warning};
use std::collections::{BTreeSet, HashMap};

const COLUMNS: [&str; 4] = ["instance", "annotator", "system", "rank"];

/// Parses a rankings CSV. Columns may come in any order; extra columns are ignored with a
/// warning. Ranks are numbers >= 1 (ties and fractional ranks allowed). A second row for
/// the same (instance, annotator, system) is an error naming both lines.
pub fn parse_rankings(name: &str, text: &str) -> Result<(HumanRankings, Vec<Warning>)> {
    let (mut reader, header, mut lines) = open_csv(name, text)?;
    let columns = header.require_all(name, &COLUMNS)?;
    let warnings: Vec<Warning> = header.unknown_columns(name, |c| COLUMNS.contains(&c)).into_iter().collect();

    let mut rows: Vec<HumanRank> = Vec::new();
    let mut line_of: HashMap<(String, String, String), usize> = HashMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| lines.error(name, e))?;
        let line = lines.of(&record);
        let field = |i: usize| non_empty(name, line, COLUMNS[i], &record, columns[i]);
        let (instance, annotator, system) = (field(0)?, field(1)?, field(2)?);
        let rank = parse_number(name, line, "rank", field(3)?)?;
        if rank < 1.0 {
            return Err(Error::input(name, line, "rank", format!("rank {rank} is below 1 (1 = best)")));
        }
        let key = (instance.to_owned(), annotator.to_owned(), system.to_owned());
        if let Some(first) = line_of.insert(key, line) {
            return Err(Error::input(
                name,
                line,
                "system",
                format!(
                    "annotator `{annotator}` ranked system `{system}` on instance `{instance}` twice (also on line {first})"
                ),
            ));
        }
        rows.push(HumanRank {
            instance: instance.to_owned(),
            annotator: annotator.to_owned(),
            system: system.to_owned(),
            rank,
            line,
        });
    }
    if rows.is_empty() {
        return Err(nothing_to_read(name, text, "the rankings file has a header but no rows"));
    }
    // A rank beyond the number of systems an annotator ranked on an instance (a block)
    // cannot come from ranking them (with ties averaged, the worst rank of n systems is
    // n): 99 among 4 systems would be taken as a far-last place, and rank 6 in a block of
    // 3 MCQA systems (a file whose NLI blocks rank 6) as a mean rank of 3.5 among 3, which
    // flipped Kendall's tau; either changes every statistic without a word.
    let mut block_sizes: HashMap<(&str, &str), usize> = HashMap::new();
    for r in &rows {
        *block_sizes.entry((r.instance.as_str(), r.annotator.as_str())).or_default() += 1;
    }
    let block_size = |r: &HumanRank| block_sizes[&(r.instance.as_str(), r.annotator.as_str())];
    if let Some(row) = rows.iter().find(|r| r.rank > block_size(r) as f64) {
        let n = block_size(row);
        return Err(Error::input(
            name,
            row.line,
            "rank",
            format!(
                "rank {} is above the number of systems annotator `{}` ranked on instance `{}` ({n}); ranks go from 1 (best) to {n} within each annotator's ranking of an instance",
                row.rank, row.annotator, row.instance
            ),
        ));
    }
    let distinct = |get: fn(&HumanRank) -> &String| {
        let mut seen = std::collections::HashSet::new();
        rows.iter().map(get).filter(|v| seen.insert(v.as_str())).cloned().collect::<Vec<_>>()
    };
    let rankings = HumanRankings {
        name: name.to_owned(),
        instances: distinct(|r| &r.instance),
        annotators: distinct(|r| &r.annotator),
        systems: distinct(|r| &r.system),
        rows,
    };
    Ok((rankings, warnings))
}

/// Human rankings rank the systems, never the control cases (`controls`): a row for one is
/// an error at its line, whether or not a bundle is given (with controls added to the
/// bundle it would otherwise fit, and leave every Friedman block incomplete).
pub fn check_no_control_rows(rankings: &HumanRankings, controls: &[String]) -> Result<()> {
    match rankings.rows.iter().find(|r| controls.contains(&r.system)) {
        Some(row) => Err(Error::input(
            &rankings.name,
            row.line,
            "system",
            format!(
                "system `{}` is a control case; human rankings rank the systems, not the control cases (control systems: {})",
                row.system,
                controls.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

/// Warnings for (instance, annotator) blocks that leave out a system the block should
/// rank; `expected(instance)` lists those systems. One warning per (annotator, system).
fn incomplete_blocks(rankings: &HumanRankings, expected: impl Fn(&str) -> Vec<String>) -> Vec<Warning> {
    let ranked: BTreeSet<(&str, &str, &str)> =
        rankings.rows.iter().map(|r| (r.instance.as_str(), r.annotator.as_str(), r.system.as_str())).collect();
    let blocks: BTreeSet<(&str, &str)> = ranked.iter().map(|(i, a, _)| (*i, *a)).collect();
    let mut tally = Tally::new(&rankings.name);
    // Iterate in file order of instances so listed ids read naturally.
    for instance in &rankings.instances {
        for annotator in &rankings.annotators {
            if !blocks.contains(&(instance.as_str(), annotator.as_str())) {
                continue;
            }
            for system in expected(instance) {
                if !ranked.contains(&(instance.as_str(), annotator.as_str(), system.as_str())) {
                    tally.add(
                        format!("annotator `{annotator}` did not rank system `{system}` on instances"),
                        instance.clone(),
                    );
                }
            }
        }
    }
    tally.into_warnings()
}

/// Checks rankings against the bundle they judge. Errors: an instance the bundle does
/// not have, a system the bundle does not have, or a system without an argument on that
/// instance (first offending row; the message counts the others). Warnings: systems with
/// an argument on an instance that an annotator who ranked that instance did not rank.
pub fn check_rankings_against(rankings: &HumanRankings, bundle: &Bundle) -> Result<Vec<Warning>> {
    check_rankings_against_except(rankings, bundle, &[])
}

/// [`check_rankings_against`], where the systems in `not_ranked_by_humans` (the control
/// cases) are not expected in the rankings: no warning when an annotator skips them.
pub fn check_rankings_against_except(
    rankings: &HumanRankings,
    bundle: &Bundle,
    not_ranked_by_humans: &[String],
) -> Result<Vec<Warning>> {
    let instances: HashMap<&str, &Instance> = bundle.instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let row_problem = |row: &HumanRank| -> Option<(&'static str, String)> {
        match instances.get(row.instance.as_str()) {
            None => Some(("instance", format!("instance `{}` is not in bundle `{}`", row.instance, bundle.name))),
            Some(_) if !bundle.systems.contains(&row.system) => {
                Some(("system", format!("system `{}` is not in bundle `{}`", row.system, bundle.name)))
            }
            Some(instance) if instance.argument(&row.system).is_none() => {
                Some(("system", format!("instance `{}` has no argument from system `{}`", row.instance, row.system)))
            }
            Some(_) => None,
        }
    };
    let problems: Vec<(&HumanRank, &str, String)> =
        rankings.rows.iter().filter_map(|row| row_problem(row).map(|(field, message)| (row, field, message))).collect();
    if let Some((row, field, message)) = problems.first() {
        let more = match problems.len() - 1 {
            0 => String::new(),
            1 => " (1 more row does not match the bundle)".to_owned(),
            n => format!(" ({n} more rows do not match the bundle)"),
        };
        return Err(Error::input(&rankings.name, row.line, field, format!("{message}{more}")));
    }
    Ok(incomplete_blocks(rankings, |instance| {
        instances[instance]
            .arguments
            .iter()
            .map(|(s, _)| s.clone())
            .filter(|s| !not_ranked_by_humans.contains(s))
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::parse_bundle;

    const EXAMPLE: &str = include_str!("../../examples/rankings.csv");
    const BUNDLE: &str = include_str!("../../examples/bundle.jsonl");

    fn error_at(text: &str) -> (usize, Option<String>, String) {
        let err = parse_rankings("r.csv", text).unwrap_err();
        let loc = err.location().expect("located").clone();
        assert_eq!(loc.file, "r.csv");
        (loc.line.expect("a line"), loc.field, err.to_string())
    }

    #[test]
    fn example_rankings_parse_and_fit_the_example_bundle() {
        let (rankings, warnings) = parse_rankings("rankings.csv", EXAMPLE).unwrap();
        assert!(warnings.is_empty());
        assert_eq!(rankings.rows.len(), 96);
        assert_eq!(rankings.annotators, ["clin_a", "clin_b", "clin_c"]);
        assert_eq!(rankings.instances.len(), 8);
        assert_eq!(rankings.systems, ["expert", "gpt-4o", "llama-3-70b", "openbiollm-70b"]);
        assert!(rankings.rows.iter().any(|r| r.rank == 2.5), "fractional ties are kept");
        assert_eq!(rankings.rows[0].line, 2, "the header is line 1");
        let (bundle, _) = parse_bundle("bundle.jsonl", BUNDLE).unwrap();
        assert_eq!(check_rankings_against(&rankings, &bundle).unwrap(), []);
    }

    #[test]
    fn ranks_beyond_the_number_of_systems_are_refused() {
        // The example ranks 4 systems; a rank of 99 on line 5 (the 4th row) was accepted and
        // flipped Kendall's tau against the evaluator from 0.548 to -0.183.
        let mut lines: Vec<String> = EXAMPLE.lines().map(str::to_owned).collect();
        let cells: Vec<&str> = lines[4].split(',').collect();
        lines[4] = format!("{},{},{},99", cells[0], cells[1], cells[2]);
        let (line, field, message) = error_at(&lines.join("\n"));
        assert_eq!((line, field.as_deref()), (5, Some("rank")));
        assert!(
            message.ends_with("rank 99 is above the number of systems annotator `clin_a` ranked on instance `mcqa-01` (4); ranks go from 1 (best) to 4 within each annotator's ranking of an instance"),
            "{message}"
        );
        // An averaged tie for the last two places of 3 systems (2.5) is fine...
        let ok = "instance,annotator,system,rank\ni,a,s1,1\ni,a,s2,2.5\ni,a,s3,2.5\n";
        assert!(parse_rankings("r.csv", ok).is_ok());
        // ...but not 3.5 among 3.
        let (line, _, _) = error_at("instance,annotator,system,rank\ni,a,s1,1\ni,a,s2,3.5\ni,a,s3,3\n");
        assert_eq!(line, 3);
    }

    #[test]
    fn the_rank_limit_is_the_size_of_each_annotators_ranking_of_an_instance() {
        // An MCQA block of 3 systems beside an NLI block of 6: the file has 9 systems, so
        // the per-file limit let rank 6 into the MCQA block (mean ranks 1, 2 and 6 where 3
        // systems can only average 2: the system ranked 6 looked far worse than last).
        let mut text = String::from("instance,annotator,system,rank\nm1,a,s1,1\nm1,a,s2,2\nm1,a,s3,6\n");
        for k in 1..=6 {
            text.push_str(&format!("n1,a,t{k},{k}\n"));
        }
        let (line, field, message) = error_at(&text);
        assert_eq!((line, field.as_deref()), (4, Some("rank")));
        assert!(message.ends_with("rank 6 is above the number of systems annotator `a` ranked on instance `m1` (3); ranks go from 1 (best) to 3 within each annotator's ranking of an instance"), "{message}");
        // Rank 3 there is the block's last place, and the NLI block keeps its 6.
        let fixed = text.replace("m1,a,s3,6", "m1,a,s3,3");
        let (rankings, _) = parse_rankings("r.csv", &fixed).unwrap();
        assert_eq!(rankings.rows.iter().map(|r| r.rank).fold(0.0, f64::max), 6.0);
        // Blocks are per annotator too: b ranking only two systems of m1 tops out at 2.
        let two = format!("{fixed}m1,b,s1,1\nm1,b,s2,3\n");
        let (line, _, message) = error_at(&two);
        assert_eq!(line, 12);
        assert!(message.contains("annotator `b` ranked on instance `m1` (2)"), "{message}");
    }

    #[test]
    fn rows_for_control_systems_are_refused_with_or_without_a_bundle() {
        let text = format!("{EXAMPLE}mcqa-01,clin_a,noise,4\n");
        let (rankings, _) = parse_rankings("r.csv", &text).unwrap();
        let controls: Vec<String> = ["no_argument", "noise"].map(String::from).to_vec();
        let err = check_no_control_rows(&rankings, &controls).unwrap_err();
        // 96 example rows after the header on line 1: the added row is line 98.
        assert_eq!(err.to_string(), "r.csv:98: field `system`: system `noise` is a control case; human rankings rank the systems, not the control cases (control systems: no_argument, noise)");
        let (example, _) = parse_rankings("r.csv", EXAMPLE).unwrap();
        assert!(check_no_control_rows(&example, &controls).is_ok());
    }

    #[test]
    fn quoted_fields_with_commas_and_newlines_keep_line_numbers() {
        let text =
            "rank,system,instance,annotator\n1,\"sys, v2\",a,\"Dr. X\nsecond line\"\n2,s,a,\"Dr. X\nsecond line\"\n";
        let (rankings, _) = parse_rankings("r.csv", text).unwrap();
        assert_eq!(rankings.rows[0].system, "sys, v2");
        assert_eq!(rankings.rows[0].annotator, "Dr. X\nsecond line");
        let lines: Vec<usize> = rankings.rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 4]);
    }

    #[test]
    fn missing_column_is_an_error_on_the_header() {
        let (line, field, message) = error_at("instance,annotator,system\na,b,c\n");
        assert_eq!((line, field.as_deref()), (1, Some("rank")));
        assert!(message.contains("missing column `rank`"));
    }

    #[test]
    fn bad_rank_values_are_errors_at_their_line() {
        let (line, field, message) = error_at("instance,annotator,system,rank\na,b,c,1\na,b,d,first\n");
        assert_eq!((line, field.as_deref()), (3, Some("rank")));
        assert!(message.ends_with("expected a number, found `first`"));
        let (line, field, message) = error_at("instance,annotator,system,rank\na,b,c,0.5\n");
        assert_eq!((line, field.as_deref()), (2, Some("rank")));
        assert!(message.ends_with("rank 0.5 is below 1 (1 = best)"));
        let (line, field, _) = error_at("instance,annotator,system,rank\na,,c,1\n");
        assert_eq!((line, field.as_deref()), (2, Some("annotator")));
    }

    #[test]
    fn short_row_is_an_error_at_its_line() {
        let (line, field, message) = error_at("instance,annotator,system,rank\na,b,c,1\na,b,2\n");
        assert_eq!((line, field), (3, None));
        assert!(message.ends_with("this row has 3 fields but the header has 4"));
    }

    #[test]
    fn duplicate_ranking_names_both_lines() {
        let (line, field, message) = error_at("instance,annotator,system,rank\na,b,c,1\na,b,d,2\na,b,c,2\n");
        assert_eq!((line, field.as_deref()), (4, Some("system")));
        assert!(message.ends_with("annotator `b` ranked system `c` on instance `a` twice (also on line 2)"));
    }

    #[test]
    fn systems_humans_do_not_rank_are_not_expected() {
        let (mut bundle, _) = parse_bundle("bundle.jsonl", BUNDLE).unwrap();
        for instance in &mut bundle.instances {
            instance.arguments.push(("no_argument".into(), String::new()));
        }
        bundle.systems.push("no_argument".into());
        let (rankings, _) = parse_rankings("rankings.csv", EXAMPLE).unwrap();
        let warnings = check_rankings_against(&rankings, &bundle).unwrap();
        assert_eq!(warnings.len(), 3, "one per annotator: {warnings:?}");
        assert!(warnings[0].to_string().ends_with("annotator `clin_a` did not rank system `no_argument` on instances: 8 (mcqa-01, mcqa-02, mcqa-03, mcqa-04, mcqa-05, mcqa-06, misinfo-01, nli-03)"));
        let except = ["no_argument".to_string()];
        assert_eq!(check_rankings_against_except(&rankings, &bundle, &except).unwrap(), []);
    }

    #[test]
    fn check_against_bundle_reports_unknown_rows_and_unranked_systems() {
        let (bundle, _) = parse_bundle("bundle.jsonl", BUNDLE).unwrap();
        let text = "instance,annotator,system,rank\nmcqa-01,a,expert,1\nmcqa-01,a,gpt-4o,2\nnope,a,expert,1\nmcqa-02,a,claude,1\n";
        let (rankings, _) = parse_rankings("r.csv", text).unwrap();
        let err = check_rankings_against(&rankings, &bundle).unwrap_err();
        let loc = err.location().unwrap();
        assert_eq!((loc.line, loc.field.as_deref()), (Some(4), Some("instance")));
        assert!(err
            .to_string()
            .ends_with("instance `nope` is not in bundle `bundle.jsonl` (1 more row does not match the bundle)"));
        let text = "instance,annotator,system,rank\nmcqa-02,a,claude,1\n";
        let err = check_rankings_against(&parse_rankings("r.csv", text).unwrap().0, &bundle).unwrap_err();
        assert_eq!(err.location().unwrap().field.as_deref(), Some("system"));

        let text = "instance,annotator,system,rank\nmcqa-01,a,expert,1\nmcqa-01,a,gpt-4o,2\nmcqa-02,a,expert,1\n";
        let (rankings, _) = parse_rankings("r.csv", text).unwrap();
        let warnings: Vec<String> =
            check_rankings_against(&rankings, &bundle).unwrap().iter().map(|w| w.to_string()).collect();
        assert_eq!(
            warnings,
            [
                "r.csv: annotator `a` did not rank system `llama-3-70b` on instances: 2 (mcqa-01, mcqa-02)",
                "r.csv: annotator `a` did not rank system `openbiollm-70b` on instances: 2 (mcqa-01, mcqa-02)",
                "r.csv: annotator `a` did not rank system `gpt-4o` on instances: 1 (mcqa-02)",
            ]
        );
    }
}
