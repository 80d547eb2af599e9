# Source me: the Open MPI settings of launch/mpi.env (running as root, more ranks than cores) exported into
# this shell. An OMP_NUM_THREADS already set is kept.
_zero_omp=${OMP_NUM_THREADS:-}
set -a
source "$(dirname "${BASH_SOURCE[0]}")/mpi.env"
set +a
if [ -n "$_zero_omp" ]; then export OMP_NUM_THREADS=$_zero_omp; fi
unset _zero_omp
