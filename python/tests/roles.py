"""The test jobs' entry point: start the node, then the scheduler only
finalizes, a server runs server(), a worker worker() (each finalizes)."""

import pslite


def main(server, worker):
    pslite.start()
    if pslite.is_scheduler():
        pslite.finalize()
    elif pslite.is_server():
        server()
    else:
        worker()
    return 0
