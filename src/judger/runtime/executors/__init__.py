"""Where a judger's calls run: one executor per place, behind one interface, and one function that
picks it (:func:`~judger.runtime.executors.pick.pick_executor`).

A judger declares what its calls need (:class:`~judger.runtime.executors.base.Needs`) and hands
its calls to the executor picked for that; it holds no deadline or hand-off machinery of its own:

- :mod:`.inline`: on the event loop itself, for calls bounded by construction;
- :mod:`.coroutine`: async functions awaited on the loop, each under its deadline;
- :mod:`.thread`: sync calls on a budget of worker threads, a deadline per call from when it starts;
- :mod:`.process`: sync calls in the shared killable worker processes;
- :mod:`.sandbox`: calls that run untrusted programs, each in its own sandbox;
- :mod:`.http`: calls that are a POST to a URL.
"""
