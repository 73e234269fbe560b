use super::*;

/// The bench size: 100,000 arguments (25,000 MCQA instances × 4 systems), 1,000
/// resamples. Run with `cargo test --release --lib eval::proxy::scale -- --ignored`.
#[test]
#[ignore]
fn ranks_100000_arguments() {
    let systems = ["a", "b", "c", "d"];
    let mut instances = Vec::new();
    let mut predictions = Vec::new();
    for i in 0..25_000 {
        let id = format!("i{i}");
        instances.push(Instance {
            id: id.clone(),
            problem: Problem::Mcqa {
                question: "q".into(),
                options: (1..=5).map(|k| (k.to_string(), String::new())).collect(),
                answer: "1".into(),
            },
            arguments: systems.iter().map(|s| (s.to_string(), String::new())).collect(),
            line: i + 1,
        });
        for (s, system) in systems.iter().enumerate() {
            let right = (i * 7 + s * 3) % (5 + s) != 0;
            predictions.push(Prediction {
                instance: id.clone(),
                system: system.to_string(),
                predicted: if right { "1" } else { "2" }.into(),
                p_correct: 0.5,
                probs: vec![],
            });
        }
    }
    let bundle = Bundle {
        name: "big".into(),
        instances,
        systems: systems.iter().map(|s| s.to_string()).collect(),
        controls: Vec::new(),
    };
    let start = std::time::Instant::now();
    let report = rank_systems(&bundle, &predictions, &ProxyOptions::default(), None).unwrap();
    eprintln!("rank_systems on 100,000 arguments: {:?}", start.elapsed());
    assert_eq!(report.tasks[0].n_instances, 25_000);
}
