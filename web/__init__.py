"""``teamgym play ENV --web``: people and agents in one team, through a page in the browser.

``hub`` (the people, their open turns and episodes), ``server`` (FastAPI routes and uvicorn in
the run's event loop), ``agent`` (the ``human`` agent kind that posts turns to the page),
``page.html`` (the page). Needs the ``web`` extra: ``pip install 'teamgym[web]'``.
"""
