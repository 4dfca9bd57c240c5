"""``teamgym play ENV --web``: people and agents in one team, through a page in the browser.

``hub`` (the people, their open turns and episodes), ``server`` (FastAPI routes and uvicorn in
the run's event loop), ``agent`` (the ``human`` agent kind that posts turns to the page),
``page.html`` (the page: each seat's drawing, which a click or a key acts on, its buttons, its
observation one click away). Needs the ``web`` extra: ``pip install 'teamgym[web]'``.
"""
