-- The store's schema before migrations (Tribunal 2026-12-01, created by create_all): PostgreSQL (pg_dump --schema-only).
--
-- PostgreSQL database dump
--

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

--
-- Name: tribunal_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.tribunal_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END; $$;

--
-- Name: audit_decisions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_decisions (
    id character varying(32) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    kind character varying(16) NOT NULL,
    request_id character varying(128) NOT NULL,
    query text NOT NULL,
    collection character varying(128) NOT NULL,
    decision character varying(32) NOT NULL,
    reason character varying(64) NOT NULL,
    failed_stage character varying(32) NOT NULL,
    error text NOT NULL,
    confidence double precision,
    threshold double precision,
    kb_entry_id character varying(256) NOT NULL,
    candidate_ids json NOT NULL,
    signals json NOT NULL,
    versions json NOT NULL,
    latencies_ms json NOT NULL,
    total_ms double precision NOT NULL,
    detail json NOT NULL
);

--
-- Name: escalations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.escalations (
    id character varying(32) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    item_id character varying(256) NOT NULL,
    query text NOT NULL,
    chunk text NOT NULL,
    answers json NOT NULL,
    reason character varying(64) NOT NULL,
    history json NOT NULL,
    audit_id character varying(32) NOT NULL,
    status character varying(16) NOT NULL
);

--
-- Name: job_items; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.job_items (
    job character varying(128) NOT NULL,
    item_id character varying(256) NOT NULL,
    "position" integer NOT NULL,
    query_id character varying(128) NOT NULL,
    doc_id character varying(256) NOT NULL,
    query text NOT NULL,
    chunk text NOT NULL,
    answers json NOT NULL,
    gold integer,
    label integer,
    source character varying(16),
    p_relevant double precision,
    outcome character varying(16),
    tokens integer,
    seconds double precision,
    escalation_id character varying(32),
    audit_id character varying(32),
    finished_at timestamp with time zone,
    human_label integer,
    human_method character varying(32)
);

--
-- Name: label_jobs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.label_jobs (
    name character varying(128) NOT NULL,
    mode character varying(16) NOT NULL,
    settings json NOT NULL,
    source json NOT NULL,
    created_at timestamp with time zone NOT NULL,
    status character varying(16) NOT NULL
);

--
-- Name: review_votes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.review_votes (
    id character varying(32) NOT NULL,
    item_key character varying(160) NOT NULL,
    job character varying(128),
    annotator character varying(128) NOT NULL,
    label character varying(16) NOT NULL,
    is_attention boolean NOT NULL,
    expected_label character varying(16),
    created_at timestamp with time zone NOT NULL,
    seconds double precision
);

--
-- Name: audit_decisions audit_decisions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_decisions
    ADD CONSTRAINT audit_decisions_pkey PRIMARY KEY (id);

--
-- Name: escalations escalations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.escalations
    ADD CONSTRAINT escalations_pkey PRIMARY KEY (id);

--
-- Name: job_items job_items_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.job_items
    ADD CONSTRAINT job_items_pkey PRIMARY KEY (job, item_id);

--
-- Name: label_jobs label_jobs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.label_jobs
    ADD CONSTRAINT label_jobs_pkey PRIMARY KEY (name);

--
-- Name: review_votes review_votes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.review_votes
    ADD CONSTRAINT review_votes_pkey PRIMARY KEY (id);

--
-- Name: review_votes uq_review_votes_item_annotator; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.review_votes
    ADD CONSTRAINT uq_review_votes_item_annotator UNIQUE (item_key, annotator);

--
-- Name: ix_audit_decisions_created_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_audit_decisions_created_at ON public.audit_decisions USING btree (created_at);

--
-- Name: ix_audit_decisions_kind_decision; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_audit_decisions_kind_decision ON public.audit_decisions USING btree (kind, decision);

--
-- Name: ix_escalations_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_escalations_status ON public.escalations USING btree (status, created_at);

--
-- Name: ix_job_items_escalation; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_job_items_escalation ON public.job_items USING btree (escalation_id);

--
-- Name: ix_job_items_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_job_items_pending ON public.job_items USING btree (job, finished_at, "position");

--
-- Name: ix_review_votes_annotator; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ix_review_votes_annotator ON public.review_votes USING btree (annotator);

--
-- Name: audit_decisions audit_decisions_append_only; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_decisions_append_only BEFORE DELETE OR UPDATE ON public.audit_decisions FOR EACH ROW EXECUTE FUNCTION public.tribunal_append_only();

--
-- PostgreSQL database dump complete
--
