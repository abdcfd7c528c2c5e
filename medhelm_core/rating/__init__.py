"""Step 2, clinicians rate: assignment, each clinician's queue, ratings and their revisions, test-retest,
gold items, adjudication and rater quality.
"""
