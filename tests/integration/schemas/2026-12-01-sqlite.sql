-- The store's schema before migrations (Tribunal 2026-12-01, created by create_all): SQLite.
CREATE TABLE audit_decisions (
	id VARCHAR(32) NOT NULL, 
	created_at DATETIME NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	request_id VARCHAR(128) NOT NULL, 
	"query" TEXT NOT NULL, 
	collection VARCHAR(128) NOT NULL, 
	decision VARCHAR(32) NOT NULL, 
	reason VARCHAR(64) NOT NULL, 
	failed_stage VARCHAR(32) NOT NULL, 
	error TEXT NOT NULL, 
	confidence FLOAT, 
	threshold FLOAT, 
	kb_entry_id VARCHAR(256) NOT NULL, 
	candidate_ids JSON NOT NULL, 
	signals JSON NOT NULL, 
	versions JSON NOT NULL, 
	latencies_ms JSON NOT NULL, 
	total_ms FLOAT NOT NULL, 
	detail JSON NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE escalations (
	id VARCHAR(32) NOT NULL, 
	created_at DATETIME NOT NULL, 
	item_id VARCHAR(256) NOT NULL, 
	"query" TEXT NOT NULL, 
	chunk TEXT NOT NULL, 
	answers JSON NOT NULL, 
	reason VARCHAR(64) NOT NULL, 
	history JSON NOT NULL, 
	audit_id VARCHAR(32) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	PRIMARY KEY (id)
);
CREATE TABLE job_items (
	job VARCHAR(128) NOT NULL, 
	item_id VARCHAR(256) NOT NULL, 
	position INTEGER NOT NULL, 
	query_id VARCHAR(128) NOT NULL, 
	doc_id VARCHAR(256) NOT NULL, 
	"query" TEXT NOT NULL, 
	chunk TEXT NOT NULL, 
	answers JSON NOT NULL, 
	gold INTEGER, 
	label INTEGER, 
	source VARCHAR(16), 
	p_relevant FLOAT, 
	outcome VARCHAR(16), 
	tokens INTEGER, 
	seconds FLOAT, 
	escalation_id VARCHAR(32), 
	audit_id VARCHAR(32), 
	finished_at DATETIME, 
	human_label INTEGER, 
	human_method VARCHAR(32), 
	PRIMARY KEY (job, item_id)
);
CREATE TABLE label_jobs (
	name VARCHAR(128) NOT NULL, 
	mode VARCHAR(16) NOT NULL, 
	settings JSON NOT NULL, 
	source JSON NOT NULL, 
	created_at DATETIME NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE review_votes (
	id VARCHAR(32) NOT NULL, 
	item_key VARCHAR(160) NOT NULL, 
	job VARCHAR(128), 
	annotator VARCHAR(128) NOT NULL, 
	label VARCHAR(16) NOT NULL, 
	is_attention BOOLEAN NOT NULL, 
	expected_label VARCHAR(16), 
	created_at DATETIME NOT NULL, 
	seconds FLOAT, 
	PRIMARY KEY (id), 
	CONSTRAINT uq_review_votes_item_annotator UNIQUE (item_key, annotator)
);
CREATE INDEX ix_audit_decisions_created_at ON audit_decisions (created_at);
CREATE INDEX ix_audit_decisions_kind_decision ON audit_decisions (kind, decision);
CREATE INDEX ix_escalations_status ON escalations (status, created_at);
CREATE INDEX ix_job_items_escalation ON job_items (escalation_id);
CREATE INDEX ix_job_items_pending ON job_items (job, finished_at, position);
CREATE INDEX ix_review_votes_annotator ON review_votes (annotator);
CREATE TRIGGER audit_decisions_no_delete BEFORE DELETE ON audit_decisions BEGIN SELECT RAISE(ABORT, 'audit_decisions is append-only'); END;
CREATE TRIGGER audit_decisions_no_update BEFORE UPDATE ON audit_decisions BEGIN SELECT RAISE(ABORT, 'audit_decisions is append-only'); END;
