-- Numbers for job directories ($KB_HOME/jobs/<n>): the directory must exist before sbatch gives the job its id.
CREATE SEQUENCE scheduler_job_dir_seq;
