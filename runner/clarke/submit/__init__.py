"""A campaign's shards on a cluster's scheduler: `clarke submit slurm` and `clarke submit
k8s --emit`.

    model.py      the submission: options, checked once against the campaign's plan
    steps.py      the shard step and the merge step (shell), the same for every engine,
                  and the small template renderer the engines' files are written with
    slurm.py      the Slurm job array and merge job: batch scripts, sbatch, partitions
    slurm_jobs.py the submitted jobs' states (scontrol) and waiting for them
    k8s.py        the Kubernetes Indexed Job and merge Job (manifests only)
    templates/    the files both engines are written from

Every engine runs the same two steps, `clarke run --shard i/N` (resuming the shard's
directory when it exists) and `clarke results merge` with `clarke report`, so the
engines cannot drift. Clarke's own code is reached only through these command lines and
the campaign's plan (clarke.campaign.plan) for the shards' sizes."""
