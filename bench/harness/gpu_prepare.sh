# Sourced by the device scripts (bench/harness/*_gpu.sh, from the repository root, with $CARRY set): gives the GPU
# image what the service's machine has (make up / .ci/run install it) and the image lacks, from $CARRY: bubblewrap
# from its Debian .deb, the job user kb-job, and structlog's wheel in /tmp/kb-site (services/common/sandbox.py logs
# through it: put /tmp/kb-site on PYTHONPATH where the service path runs). What it found goes to the file $1.
# usage: . bench/harness/gpu_prepare.sh LOG
if ! command -v bwrap >/dev/null; then
    for deb in "$CARRY"/*.deb; do dpkg -x "$deb" /tmp/kb-deb; done
    [ -x /tmp/kb-deb/usr/bin/bwrap ] && cp /tmp/kb-deb/usr/bin/bwrap /usr/local/bin/bwrap
fi
id kb-job >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kb-job
python3 -m pip install -q --no-index --no-deps --target /tmp/kb-site "$CARRY"/*.whl >>"$1" 2>&1
{ command -v bwrap setpriv unshare prlimit; bwrap --version; id kb-job; ls -l /dev/nvidia*; } >>"$1" 2>&1
