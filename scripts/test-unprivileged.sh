#!/usr/bin/env bash
# Run the sandbox tests as an ordinary (non-root) user.
#
# CI runs as root, where the sandbox drops the child to uid 65534; an
# instructor's laptop runs as an ordinary user, where the sandbox relies on
# user namespaces and Landlock instead. This script proves the second path.
#
# As root it creates the user $SANDBOX_TEST_USER (default: sandboxtest) if
# missing, copies the checkout to a world-readable temp folder (a clone under
# /root, mode 0700, is unreadable to that user), and runs pytest through
# setpriv. The interpreter: .venv/bin/python links into /root/.pyenv (also
# 0700), so it uses Debian's /usr/bin/python3.X with the venv's site-packages
# on PYTHONPATH (hard-linked into the temp folder when the user cannot read
# them in place). Run as a non-root user it just runs the tests.
#
# Usage: bash scripts/test-unprivileged.sh [pytest args]   (needs scripts/setup.sh first;
#        VENV=/path/to/venv to use another checkout's venv)
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what takes another path as non-root (the rest already ran as root in
# scripts/test.sh and would only run twice): the sandbox on its own (user
# namespaces and Landlock instead of a uid drop); the attack corpora under
# tests/redteam/ through `grader grade` end to end; intake and hostile exam
# files with modes a non-root grader cannot read (redteam/intake/,
# hardening/), one exam class through `grader exam grade`.
TESTS=(tests/test_sandbox.py tests/test_sandbox_redteam.py tests/test_sandbox_trust.py tests/test_sandbox_probe_loading.py
       tests/test_sandbox_seccomp.py tests/redteam
       tests/hardening/test_hostile_notebooks.py tests/hardening/test_exam_hostile.py
       tests/hardening/test_exam_class_run.py)
# Left to the root pass: these judge what comes back from the sandbox (the
# kernel recorder's list, which parameters did work, the words of feedback,
# what an answer computed with an oracle scores), the same data whichever
# user ran the child. (A forged result frame, which kit_oracle's k05 also
# sends, is proved on this path by test_sandbox_redteam.py.)
TESTS+=(--ignore=tests/redteam/test_forbidden.py --ignore=tests/redteam/test_real_work.py
        --ignore=tests/redteam/student_text --ignore=tests/redteam/test_kit_oracle.py)

# Two pytest-xdist workers where it is installed, grouped as in scripts/test.sh
# (tests/conftest.py: the sandbox's own tests never run beside each other).
# TEST_WORKERS=0: one process.
parallel=()
workers=${TEST_WORKERS:-2}

if [ "$(id -u)" -ne 0 ]; then
    if [ "$workers" != 0 ] && "${PYTHON:-.venv/bin/python}" -c "import xdist" 2>/dev/null; then
        parallel=(-n "$workers" --dist loadgroup)
    fi
    exec "${PYTHON:-.venv/bin/python}" -m pytest -p no:cacheprovider -ra "${parallel[@]}" "${TESTS[@]}" "$@"
fi

user=${SANDBOX_TEST_USER:-sandboxtest}
if ! id -u "$user" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
as_user() { setpriv --reuid "$uid" --regid "$gid" --clear-groups -- "$@"; }

venv_python=${VENV:-.venv}/bin/python  # VENV: another checkout's venv (worktrees)
[ -x "$venv_python" ] || { echo "no .venv: run scripts/setup.sh first" >&2; exit 1; }
read -r version site <<<"$("$venv_python" -c 'import site, sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}", site.getsitepackages()[0])')"
python=${SANDBOX_TEST_PYTHON:-/usr/bin/python$version}
as_user test -x "$python" || { echo "$python is not runnable by $user; set SANDBOX_TEST_PYTHON" >&2; exit 1; }

work=$(mktemp -d /tmp/sandbox-unprivileged-XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir "$work/repo" "$work/home"
# The working tree as git sees it (tracked and untracked, not ignored), without .git or .venv.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/repo"
else
    tar --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$work/repo"
fi
chmod -R a+rX "$work/repo"
chown "$uid:$gid" "$work/home"
if ! as_user test -r "$site/torch/__init__.py"; then
    # Hard links are instant; a copy (other filesystem) is made readable. Venv files are 0644 already.
    cp -al "$site" "$work/site-packages" 2>/dev/null || { cp -a "$site" "$work/site-packages" &&
        chmod -R a+rX "$work/site-packages"; }
    site=$work/site-packages
fi

if [ "$workers" != 0 ] && [ -f "$site/xdist/__init__.py" ]; then
    parallel=(-n "$workers" --dist loadgroup)
fi
echo "running the sandbox tests as $user (uid $uid) with $python and $site" >&2
cd "$work/repo"
as_user env -i PATH=/usr/bin:/bin HOME="$work/home" LANG=C.UTF-8 PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 \
    "$python" -m pytest -p no:cacheprovider -ra "${parallel[@]}" "${TESTS[@]}" "$@"
