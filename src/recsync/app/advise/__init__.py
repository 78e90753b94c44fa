"""`recsync advise`: which strategy, and how many trainers and servers, train a job fastest
on a cluster to the best quality, predicted in the simulator before the cluster is paid
for (docs/advise.md). `advise` (advice.py) is the pure entry point: a job, a cluster file
and options in, every candidate measured and ranked out; report.py shows it."""
