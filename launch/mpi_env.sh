# Source me: Open MPI settings for running as root with more ranks than cores (CI containers).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# One math thread per rank: oversubscribed ranks with several threads each crawl.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
