"""Exams: per-student variants, questions, building the students' folders,
grading answers and code, time limits and statistics.

- ``variants.py``     the exam secret and each student's variant (sizes, question
                      parameters, choice orders), derived with HMAC-SHA256
- ``expr.py``         the small arithmetic language of sizes and answers
- ``questions.py``    a question as a student sees it, and its answer key
- ``reference_calc.py`` numeric answers computed by running the references
                      (in a subprocess: nothing here imports a student's file)
- ``answers_file.py`` reading ``answers.yaml`` with bounds (size, no aliases, depth)
- ``answers.py``      grading the answers
- ``intake.py``       which files are a student's exam: one source, the exam's own folder, bounded copies
- ``build.py``        ``grader exam build``: one folder per student
- ``nbgrader.py``     ``grader exam build --nbgrader``: one nbgrader assignment per student
- ``timing.py``       collection timestamps, deadlines and the late policy
- ``checks.py``       variant-aware hidden checks and the per-student judge
- ``grading.py``      ``grade_exam``: grade a class (the entry point for the pipeline)
- ``session.py``      ``run_exam_grading``: options in, files out, an exit code (``grader exam grade``)
- ``stats.py``        per-question and per-exercise statistics (plain dicts)
- ``report.py``       results.json, grades.csv and the exam's HTML report
- ``validate.py``     the exam part of ``load_course``'s checks
- ``cli.py``          the ``grader exam`` sub-app (mounted by grader/cli.py)

Nothing in this package is shipped to students; ``exams/questions.yaml``
(the bank, with its answers) must never be either.
"""
