"""The test jobs' entry point: start the node, then the scheduler only
finalizes, a server runs server(), a worker worker() (each finalizes). A
joint process (DMLC_ROLE=joint) runs both: server() sets its server up and
returns without finalizing, then this thread works for the worker node and
worker() finalizes both."""

import pslite


def main(server, worker):
    pslite.start()
    if pslite.is_scheduler():
        pslite.finalize()
    elif pslite.role() == pslite.JOINT:
        kept = server()  # noqa: F841 (its handlers run until finalize)
        pslite.use_role(pslite.WORKER)
        worker()
    elif pslite.is_server():
        server()
    else:
        worker()
    return 0
