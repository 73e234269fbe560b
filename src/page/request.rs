//! From what the user dropped on the page and set in its Options to the job layer's
//! requests — the page's counterpart of the CLI's flags. Defaults come from the job layer
//! (`NrpRequestOptions`, `Bootstrap`, `Control::all_names`), and the rules that the CLI also
//! applies (which controls to add, the not-judgeable grades) are the job layer's functions,
//! so both front ends read an option the same way.

use serde::Deserialize;
use std::collections::BTreeMap;

use super::files::KindedFile;
use crate::error::{Error, Result};
use crate::jobs::{self, NamedText};

/// One file the user gave the page, with the kind they confirmed and that kind's
/// parameters (e.g. `system` for a HiTZ file, `dimension` for a qrels file).
#[derive(Debug, Clone, Deserialize)]
pub struct InputFile {
    pub name: String,
    pub text: String,
    pub kind: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

impl InputFile {
    pub fn named(&self) -> NamedText {
        NamedText::new(self.name.clone(), self.text.clone())
    }
    pub fn kinded(&self) -> KindedFile<'_> {
        KindedFile { name: &self.name, text: &self.text, kind: &self.kind, params: &self.params }
    }
    /// The file's parameter `key`, or its default from the file name when the page sent
    /// none (the evaluator of a predictions file, the ranker of a run file).
    fn param_or_stem(&self, key: &str) -> String {
        self.params.get(key).filter(|v| !v.trim().is_empty()).cloned().unwrap_or_else(|| jobs::file_stem(&self.name))
    }
}

/// The page's Options; names match the CLI's flags. Every field may be left out.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct PageOptions {
    /// The NRP options, with the bootstrap's seed, resamples and confidence (flat fields,
    /// shared by every job).
    #[serde(flatten)]
    pub nrp: jobs::NrpRequestOptions,
    /// The Controls field: `all` (every control the inputs allow), empty for none, or
    /// names (`jobs::ControlChoice`, as the CLI's `--controls`).
    pub controls: String,
    /// The "not able to judge" field: `DIMENSION=GRADES` separated by `;`.
    pub not_judgeable_grades: String,
    /// Where a model evaluation runs the encoder: auto | cpu | gpu (`--backend`).
    pub backend: String,
    /// The encoder's arithmetic in a model job: f32 | int8 (`--precision`,
    /// `model::Precision::parse`).
    pub precision: String,
    /// Keep empty MCQA options as candidates (`--keep-empty-options`).
    pub keep_empty_options: bool,
}

impl Default for PageOptions {
    fn default() -> Self {
        PageOptions {
            nrp: jobs::NrpRequestOptions::default(),
            controls: "all".into(),
            not_judgeable_grades: String::new(),
            backend: "auto".into(),
            precision: crate::model::Precision::default().name().into(),
            keep_empty_options: false,
        }
    }
}

impl PageOptions {
    pub fn controls(&self) -> jobs::ControlChoice {
        jobs::ControlChoice::parse(&self.controls)
    }
    /// The precision a model job runs the encoder in (`--precision`).
    pub fn precision(&self) -> Result<crate::model::Precision> {
        crate::model::Precision::parse(&self.precision)
    }
    /// The ranking options of `medrank evaluate` these stand for.
    pub fn ranking(&self) -> jobs::ProxyOptions {
        jobs::ProxyOptions { bootstrap: self.nrp.bootstrap, controls: self.controls().systems(), ..Default::default() }
    }
}

/// A job as the page sends it: the files it accepts and the options.
#[derive(Debug, Clone, Deserialize)]
pub struct JobRequest {
    pub files: Vec<InputFile>,
    #[serde(default)]
    pub options: PageOptions,
}

impl JobRequest {
    fn files_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a InputFile> + 'a {
        self.files.iter().filter(move |f| f.kind == kind)
    }

    /// The one file of `kind`, if any; two are an error naming both.
    fn one_file(&self, kind: &str, what: &str) -> Result<Option<&InputFile>> {
        let mut files = self.files.iter().filter(|f| f.kind == kind);
        let first = files.next();
        if let Some(second) = files.next() {
            return Err(Error::invalid(format!(
                "give one {what}, not several ({} and {})",
                first.map(|f| f.name.as_str()).unwrap_or(""),
                second.name
            )));
        }
        Ok(first)
    }

    fn required(&self, kind: &str, what: &str) -> Result<&InputFile> {
        self.one_file(kind, what)?.ok_or_else(|| Error::invalid(format!("add {what}")))
    }

    fn optional(&self, kind: &str, what: &str) -> Result<Option<NamedText>> {
        Ok(self.one_file(kind, what)?.map(InputFile::named))
    }

    /// The bundle the request gives, or the Ranking-Over-Scoring files to import it from
    /// (with the import's outcome).
    pub fn bundle(&self) -> Result<(NamedText, Option<jobs::ImportOutcome>)> {
        let ros = self
            .files_of("ros")
            .map(|f| {
                Ok(jobs::RosFile {
                    system: f.kinded().param("system")?.to_string(),
                    // The file's "control case" switch: `medrank import --control-source`.
                    control: f.params.get("control").is_some_and(|v| v == "true"),
                    file: f.named(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        jobs::bundle_or_import(self.optional("bundle", "argument bundle")?, ros)
    }

    /// Ranking over scoring from predictions files (`medrank evaluate --predictions`): each
    /// file one evaluator, named by its `evaluator` parameter or its file name.
    pub fn evaluate(&self, bundle: NamedText) -> Result<jobs::EvaluateRequest> {
        Ok(jobs::EvaluateRequest {
            bundle,
            predictions: self
                .files_of("predictions")
                .map(|f| jobs::EvaluatorPredictions { evaluator: Some(f.param_or_stem("evaluator")), file: f.named() })
                .collect(),
            rankings: self.optional("rankings", "human rankings file")?,
            corpus: self.optional("corpus", "corpus")?,
            options: self.options.ranking(),
        })
    }

    /// Ranking over scoring with a model as the evaluator (`medrank evaluate --model
    /// --controls ... --backend ...`): the request, the model's options and the backend.
    pub fn evaluate_with_model(
        &self,
        bundle: NamedText,
    ) -> Result<(jobs::EvaluateRequest, jobs::ModelOptions, crate::gpu::BackendChoice)> {
        let mut request = self.evaluate(bundle)?;
        request.predictions.clear();
        let model_options = jobs::ModelOptions {
            controls: self.options.controls(),
            keep_empty_options: self.options.keep_empty_options,
            ..Default::default()
        };
        Ok((request, model_options, jobs::parse_backend(&self.options.backend)?))
    }

    /// NRP (`medrank nrp`). A run file and an answer-scores file form one precomputed
    /// ranker (matched by their `ranker` names; a lone pair belongs together); BM25 is
    /// added when the documents are given.
    pub fn nrp(&self) -> Result<jobs::NrpRequest> {
        let named = |kind| self.files_of(kind).map(|f| (f.param_or_stem("ranker"), f.named())).collect::<Vec<_>>();
        let documents = self.optional("documents", "documents file")?;
        let mut options = self.options.nrp.clone();
        options.not_judgeable = jobs::parse_not_judgeable_list(&self.options.not_judgeable_grades)?;
        options.bm25 = documents.is_some();
        Ok(jobs::NrpRequest {
            topics: self.required("topics", "the topics (queries)")?.named(),
            qrels: self
                .files_of("qrels")
                .map(|f| jobs::QrelsFile { dimension: f.params.get("dimension").cloned(), file: f.named() })
                .chain(self.files_of("qrels_combined").map(|f| jobs::QrelsFile { dimension: None, file: f.named() }))
                .collect(),
            documents,
            answers: self
                .files_of("answers")
                .chain(self.files_of("answers_jsonl"))
                .map(|f| jobs::AnswerFile {
                    file: f.named(),
                    system: f.params.get("system").cloned(),
                    prompt: f.params.get("prompt").cloned(),
                })
                .collect(),
            rankers: jobs::pair_precomputed(&named("run"), &named("answer_scores"))?,
            expert_rankings: self.optional("expert_rankings", "expert rankings file")?,
            options,
        })
    }

    /// Reference-based metrics over one candidates file (`medrank metrics`).
    pub fn metrics(&self) -> Result<jobs::MetricsRequest> {
        Ok(jobs::MetricsRequest {
            file: self.required("metrics", "a candidates file (JSONL with candidate and references)")?.named(),
            options: crate::eval::metrics::MetricsOptions {
                bootstrap: self.options.nrp.bootstrap,
                ..Default::default()
            },
        })
    }

    /// Rubric grading over one file of graded responses (`medrank rubric`): the graded file,
    /// or, without one, the grader's graded file (Agreement's, a graded file too).
    pub fn rubric(&self) -> Result<jobs::RubricRequest> {
        let what = "a file of graded responses";
        let file = match self.one_file("rubric", what)? {
            Some(f) => f,
            None => self.required("rubric_grader", what)?,
        };
        Ok(jobs::RubricRequest {
            file: file.named(),
            options: crate::eval::rubric::RubricOptions { bootstrap: self.options.nrp.bootstrap },
        })
    }

    /// A grader's agreement with people, and the people's with each other (`medrank
    /// rubric-agreement --input --grader-file`): the grader's file is optional.
    pub fn rubric_agreement(&self) -> Result<jobs::RubricAgreementRequest> {
        Ok(jobs::RubricAgreementRequest {
            file: self.required("rubric_judged", "a rubric file judged by people (criteria with met_by)")?.named(),
            grader_file: self.optional("rubric_grader", "grader\u{2019}s graded rubric file")?,
        })
    }

    /// Grading a rubric file with the kept model as the grader (`medrank grade --rubric
    /// --backend`): the request and the backend. The batch size is the job layer's default.
    pub fn grade(&self) -> Result<(jobs::GradeRequest, crate::gpu::BackendChoice)> {
        let request = jobs::GradeRequest {
            rubric: self
                .required("rubric_responses", "a rubric file with the responses\u{2019} text to grade")?
                .named(),
            options: jobs::GradeOptions {
                rubric: crate::eval::rubric::RubricOptions { bootstrap: self.options.nrp.bootstrap },
                ..Default::default()
            },
        };
        Ok((request, jobs::parse_backend(&self.options.backend)?))
    }

    /// Statement checks with the kept model as the NLI model (`medrank statements --input
    /// --nli --backend`): the request and the backend. The batch size is the job layer's default.
    pub fn statements(&self) -> Result<(jobs::StatementRequest, crate::gpu::BackendChoice)> {
        let request = jobs::StatementRequest {
            answers: self.required("statement_answers", "a file of answers with expert statements")?.named(),
            options: jobs::StatementOptions { bootstrap: self.options.nrp.bootstrap, ..Default::default() },
        };
        Ok((request, jobs::parse_backend(&self.options.backend)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, kind: &str, params: &[(&str, &str)]) -> InputFile {
        InputFile {
            name: name.into(),
            text: format!("text of {name}"),
            kind: kind.into(),
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn request(files: Vec<InputFile>, options: serde_json::Value) -> JobRequest {
        JobRequest { files, options: serde_json::from_value(options).unwrap() }
    }

    #[test]
    fn options_left_out_take_the_job_layers_defaults() {
        let o: PageOptions = serde_json::from_value(serde_json::json!({})).unwrap();
        let nrp = jobs::NrpRequestOptions::default();
        assert_eq!(o.nrp.bootstrap, nrp.bootstrap);
        assert_eq!((o.nrp.ties.as_str(), o.nrp.denominator.as_str()), ("pessimistic", "docs"));
        assert_eq!(o.nrp.fuse_scope, nrp.fuse_scope);
        assert_eq!(o.controls(), jobs::ControlChoice::All);
        assert_eq!(o.ranking(), jobs::ProxyOptions::default());
        assert_eq!(o.precision().unwrap(), crate::model::Precision::F32);
        // The three bootstrap fields arrive flat, as the CLI's flags.
        let o: PageOptions =
            serde_json::from_value(serde_json::json!({"seed": 7, "resamples": 50, "confidence": 0.9})).unwrap();
        assert_eq!((o.nrp.bootstrap.seed, o.nrp.bootstrap.resamples, o.nrp.bootstrap.confidence), (7, 50, 0.9));
        assert_eq!(o.ranking().bootstrap, o.nrp.bootstrap);
    }

    #[test]
    fn the_controls_field_reads_as_the_clis_controls_flag() {
        let with = |controls: &str, corpus: bool| {
            let mut files = vec![file("b.jsonl", "bundle", &[])];
            if corpus {
                files.push(file("c.jsonl", "corpus", &[]));
            }
            let r = request(files, serde_json::json!({ "controls": controls }));
            let (req, model, _) = r.evaluate_with_model(r.bundle().unwrap().0).unwrap();
            (model.controls, req.options.controls)
        };
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // `all` is decided against the bundle by the job (ControlChoice::resolve) and ranks
        // every known control as one, as `--controls` without a list and `--control-systems`.
        assert_eq!(with("all", false).0, jobs::ControlChoice::All);
        assert_eq!(with("All", true).0, jobs::ControlChoice::All);
        assert_eq!(with("all", false).1, names(&["no_argument", "label_only", "noise", "ir_passages"]));
        // A list is taken as given, an empty field adds none.
        assert_eq!(
            with(" noise , label_only", false),
            (jobs::ControlChoice::Named(names(&["noise", "label_only"])), names(&["noise", "label_only"]))
        );
        assert_eq!(with("", true), (jobs::ControlChoice::Named(vec![]), vec![]));
    }

    #[test]
    fn the_precision_field_reads_as_the_clis_precision_flag() {
        let precision = |value: &str| {
            serde_json::from_value::<PageOptions>(serde_json::json!({ "precision": value })).unwrap().precision()
        };
        assert_eq!(precision("int8").unwrap(), crate::model::Precision::Int8);
        assert_eq!(precision("f32").unwrap(), crate::model::Precision::F32);
        assert_eq!(precision("f16").unwrap_err().to_string(), "precision `f16`: expected f32 or int8");
    }

    #[test]
    fn predictions_name_their_evaluator_by_parameter_or_file_name() {
        let r = request(
            vec![
                file("b.jsonl", "bundle", &[]),
                file("dir/gpt.csv", "predictions", &[]),
                file("x.csv", "predictions", &[("evaluator", "judge")]),
                file("h.csv", "rankings", &[]),
            ],
            serde_json::json!({}),
        );
        let (bundle, imported) = r.bundle().unwrap();
        assert!(imported.is_none());
        let req = r.evaluate(bundle).unwrap();
        let evaluators: Vec<_> = req.predictions.iter().map(|p| p.evaluator.clone().unwrap()).collect();
        assert_eq!(evaluators, ["gpt", "judge"]);
        assert_eq!(req.rankings.unwrap().name, "h.csv");
        assert!(req.corpus.is_none());
    }

    #[test]
    fn two_files_where_one_is_read_are_refused_naming_both() {
        let r = request(vec![file("a.jsonl", "bundle", &[]), file("b.jsonl", "bundle", &[])], serde_json::json!({}));
        let e = r.bundle().unwrap_err().to_string();
        assert!(e.contains("give one argument bundle, not several (a.jsonl and b.jsonl)"), "{e}");
        let r = request(vec![], serde_json::json!({}));
        assert_eq!(r.metrics().unwrap_err().to_string(), "add a candidates file (JSONL with candidate and references)");
    }

    #[test]
    fn grade_reads_the_file_to_grade_and_the_bootstrap_and_backend_options() {
        let r = request(
            vec![file("graded.jsonl", "rubric", &[]), file("c.jsonl", "rubric_responses", &[])],
            serde_json::json!({"seed": 7, "resamples": 30, "confidence": 0.9, "backend": "cpu"}),
        );
        let (req, backend) = r.grade().unwrap();
        assert_eq!(req.rubric.name, "c.jsonl", "a graded file is the Rubric job's, not Grade's");
        let b = req.options.rubric.bootstrap;
        assert_eq!((b.seed, b.resamples, b.confidence), (7, 30, 0.9));
        assert_eq!(req.options.batch_size, jobs::GradeOptions::default().batch_size);
        assert_eq!(backend, crate::gpu::BackendChoice::Cpu);
        let r = request(vec![file("graded.jsonl", "rubric", &[])], serde_json::json!({}));
        assert_eq!(r.grade().unwrap_err().to_string(), "add a rubric file with the responses\u{2019} text to grade");
        let r = request(vec![file("c.jsonl", "rubric_responses", &[])], serde_json::json!({"backend": "tpu"}));
        assert!(r.grade().unwrap_err().to_string().contains("unknown backend `tpu`"));
    }

    #[test]
    fn agreement_reads_the_judged_file_and_the_grader_file_and_rubric_keeps_its_graded_file() {
        let judged = file("judged.jsonl", "rubric_judged", &[]);
        let grader = file("grader.jsonl", "rubric_grader", &[]);
        let graded = file("graded.jsonl", "rubric", &[]);
        let r = request(vec![graded.clone(), judged.clone(), grader.clone()], serde_json::json!({}));
        let req = r.rubric_agreement().unwrap();
        assert_eq!(req.file.name, "judged.jsonl");
        assert_eq!(req.grader_file.map(|f| f.name).as_deref(), Some("grader.jsonl"));
        assert_eq!(r.rubric().unwrap().file.name, "graded.jsonl", "Rubric scores the graded file, not the grader's");
        // People only: no grader file is fine.
        let r = request(vec![judged.clone()], serde_json::json!({}));
        assert!(r.rubric_agreement().unwrap().grader_file.is_none());
        // A grader's file alone is still a graded file for Rubric.
        let r = request(vec![grader.clone()], serde_json::json!({}));
        assert_eq!(r.rubric().unwrap().file.name, "grader.jsonl");
        assert_eq!(
            r.rubric_agreement().unwrap_err().to_string(),
            "add a rubric file judged by people (criteria with met_by)"
        );
        let r = request(vec![judged, grader.clone(), file("g2.jsonl", "rubric_grader", &[])], serde_json::json!({}));
        let e = r.rubric_agreement().unwrap_err().to_string();
        assert!(e.contains("not several (grader.jsonl and g2.jsonl)"), "{e}");
    }

    #[test]
    fn nrp_reads_the_options_and_pairs_files_as_the_cli() {
        let r = request(
            vec![
                file("topics.xml", "topics", &[]),
                file("qrels.credibility.txt", "qrels", &[("dimension", "credibility")]),
                file("q.tsv", "qrels_combined", &[]),
                file("gpt__expert.csv", "answers", &[("system", "gpt"), ("prompt", "expert")]),
                file("dense.run", "run", &[("ranker", "dense")]),
                file("dense.csv", "answer_scores", &[("ranker", "dense")]),
            ],
            serde_json::json!({"not_judgeable_grades": "credibility=3; relevance=-1, 9", "ties": "average",
                               "weights": [["credibility", 2.0]], "resamples": 10}),
        );
        let req = r.nrp().unwrap();
        assert_eq!(
            req.options.not_judgeable,
            [("credibility".to_string(), vec![3]), ("relevance".into(), vec![-1, 9])]
        );
        assert_eq!(req.options.ties, "average");
        assert_eq!(req.options.weights, [("credibility".to_string(), 2.0)]);
        assert_eq!(req.options.bootstrap.resamples, 10);
        assert!(!req.options.bm25, "BM25 only with the documents");
        assert_eq!(
            req.qrels.iter().map(|q| q.dimension.clone()).collect::<Vec<_>>(),
            [Some("credibility".into()), None]
        );
        assert_eq!(req.rankers.len(), 1);
        assert_eq!((req.answers[0].system.as_deref(), req.answers[0].prompt.as_deref()), (Some("gpt"), Some("expert")));
        // A grade that is not a whole number is an error naming the field's entry.
        let r =
            request(vec![file("t.xml", "topics", &[])], serde_json::json!({"not_judgeable_grades": "credibility=x"}));
        let e = r.nrp().unwrap_err().to_string();
        assert!(e.contains("`credibility=x`: `x` is not a whole number"), "{e}");
    }
}
