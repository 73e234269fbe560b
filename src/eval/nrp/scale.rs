use super::*;

/// The bench size: 1,000,000 qrels lines (1,000 queries × 1,000 judged documents, one
/// dimension) and 100,000 answers (1,000 queries × 10 groups × 10 samples), two rankers.
/// Run with `cargo test --release --lib eval::nrp::scale -- --ignored`.
#[test]
#[ignore]
fn nrp_on_a_million_qrels_and_100000_answers() {
    let mut grades: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let mut docs: HashMap<String, HashMap<String, f64>> = HashMap::new();
    let mut docs2: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for q in 0..1000 {
        let qid = format!("q{q}");
        let g = grades.entry(qid.clone()).or_default();
        let s = docs.entry(qid.clone()).or_default();
        let s2 = docs2.entry(qid.clone()).or_default();
        for d in 0..1000 {
            let docno = format!("d{q}-{d}");
            g.insert(docno.clone(), ((d * 31 + q) % 3) as i64);
            s.insert(docno.clone(), ((d * 17 + q) % 101) as f64);
            s2.insert(docno, ((d * 13 + q) % 7) as f64);
        }
    }
    let judgments = vec![Judgments { dimension: "relevance".into(), grades, missing: vec![] }];
    let mut keys = Vec::new();
    let mut answers = HashMap::new();
    for q in 0..1000 {
        for g in 0..10 {
            for sample in 0..10 {
                let key = AnswerKey::new(&format!("q{q}"), &format!("s{g}"), "p", sample);
                answers.insert(key.clone(), ((q + g * 7 + sample as usize) % 103) as f64);
                keys.push(key);
            }
        }
    }
    let rankers = vec![RankerScores::new("one", docs, answers.clone()), RankerScores::new("two", docs2, answers)];
    let start = std::time::Instant::now();
    let report = nrp(&judgments, &rankers, &keys, &NrpOptions::default(), None).unwrap();
    eprintln!("nrp on 1,000,000 qrels and 100,000 answers: {:?}", start.elapsed());
    assert_eq!(report.answers.len(), 100_000);
}
