/* spookat operator inbox. Plain JS; talks to /v1/api/ (schema/PROTOCOL.md) with the session
 * cookie and the session's CSRF token, and listens to /v1/api/ws for live changes. Every text
 * that comes from visitors or Slack is set with textContent, never as HTML. */
(function () {
  'use strict';
  var root = document.getElementById('app');
  var S = { me: null, csrf: '', sites: [], site: null, filter: 'open', assignee: 'all', q: '', since: '', members: {}, unread: {}, conv: null, convs: [], msgs: {}, deliveries: {}, ws: null, wsTry: 0 };

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
      else if (v !== false && v != null) e.setAttribute(k, v === true ? '' : v);
    });
    (kids || []).forEach(function (c) { if (c) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }

  function api(method, path, body) {
    var h = { 'Accept': 'application/json' };
    if (method !== 'GET') { h['X-CSRF-Token'] = S.csrf; h['Content-Type'] = 'application/json'; }
    return fetch('/v1/api' + path, { method: method, headers: h, credentials: 'same-origin', body: body ? JSON.stringify(body) : undefined })
      .then(function (r) {
        return r.text().then(function (t) {
          var j = null; try { j = t ? JSON.parse(t) : null; } catch (e) { j = null; }
          if (r.status === 401 && path !== '/login') { S.me = null; showLogin(); }
          if (!r.ok) { var err = new Error((j && j.message) || r.statusText); err.status = r.status; throw err; }
          return j;
        });
      });
  }

/*@when.js*/
  var WORDS = { today: 'Today', yesterday: 'Yesterday', justNow: 'just now', minAgo: '{n} min ago' };
  function word(k, v) { return WORDS[k].replace('{n}', v && v.n); }
  // A full date and time, for a tooltip and for what is not a message's time.
  function when(ms) { return new Date(ms).toLocaleString(); }
  // A message's time, as the chat window says it ("just now", "5 min ago", "14:05").
  function ago(ms) { return whenAgo(ms, undefined, word); }
  // A conversation's last activity in the list: its time today, else its day.
  function lastActive(ms) {
    var d = new Date(ms);
    return d.toDateString() === new Date().toDateString() ? ago(ms) : whenDay(d, undefined, word);
  }
  function timeEl(ms) { return el('time', { datetime: new Date(ms).toISOString(), title: when(ms), text: ago(ms) }); }
  setInterval(function () {
    Array.prototype.forEach.call(document.querySelectorAll('.msgs time'), function (t) { t.textContent = ago(Date.parse(t.getAttribute('datetime'))); });
  }, 30000);
  // A time soon, said short: "Fri 09:00".
  function soon(ms) { return new Date(ms).toLocaleString([], { weekday: 'short', hour: '2-digit', minute: '2-digit' }); }

  // ---- login
  function showLogin(msg) {
    if (S.ws) { S.ws.onclose = null; S.ws.close(); S.ws = null; }
    clear(root);
    var email = el('input', { type: 'email', id: 'email', name: 'email', autocomplete: 'username', required: true });
    var pw = el('input', { type: 'password', id: 'password', name: 'password', autocomplete: 'current-password', required: true });
    var err = el('p', { class: 'error', role: 'alert', text: msg || '' });
    var form = el('form', { class: 'login', id: 'login', onsubmit: function (e) {
      e.preventDefault(); err.textContent = '';
      api('POST', '/login', { email: email.value, password: pw.value }).then(function (j) {
        S.csrf = j.csrf_token; boot();
      }, function (e) { err.textContent = e.status === 429 ? e.message : (e.status === 401 ? 'Wrong email or password.' : e.message); });
    } }, [el('h1', { text: 'spookat inbox' }), el('label', { for: 'email', text: 'Email' }), email,
      el('label', { for: 'password', text: 'Password' }), pw, el('button', { class: 'primary', type: 'submit', text: 'Log in' }), err]);
    root.appendChild(form); email.focus();
  }

  // ---- an invitation's link: /app/#/invite/<token>. Says what it is for, then joins (a new
  // account chooses its password; an existing one gives its own) and logs in.
  function showInvite(token) {
    if (S.ws) { S.ws.onclose = null; S.ws.close(); S.ws = null; }
    clear(root);
    var box = el('form', { class: 'login', id: 'invite' }, [el('h1', { text: 'spookat inbox' }), el('p', { text: 'Opening your invitation\u2026' })]);
    root.appendChild(box);
    function gone(e) {
      clear(box);
      box.appendChild(el('h1', { text: 'spookat inbox' }));
      box.appendChild(el('p', { class: 'error', id: 'invite-error', role: 'alert', text: e.message }));
      box.appendChild(el('a', { href: '#', text: 'Log in', onclick: function () { location.hash = ''; showLogin(); } }));
    }
    api('POST', '/invites/peek', { token: token }).then(function (v) {
      clear(box);
      var name = el('input', { id: 'invite-name', autocomplete: 'name' });
      var pw = el('input', { type: 'password', id: 'invite-password', required: true, minlength: 8, autocomplete: v.account ? 'current-password' : 'new-password' });
      var err = el('p', { class: 'error', role: 'alert' });
      box.appendChild(el('h1', { text: 'Join ' + v.site }));
      box.appendChild(el('p', { id: 'invite-what', text: (v.invited_by ? v.invited_by + ' invited ' : 'You are invited, as ') + (v.invited_by ? v.email + ' to answer chats here, as ' : '') + (v.role === 'owner' ? 'an owner (settings and team too).' : 'an agent.') }));
      if (v.account) {
        box.appendChild(el('p', { class: 'hint', text: v.email + ' has an account: its password adds this site to it.' }));
      } else {
        box.appendChild(el('label', { for: 'invite-name', text: 'Your name, as visitors see it' }));
        box.appendChild(name);
      }
      box.appendChild(el('label', { for: 'invite-password', text: v.account ? 'Password of ' + v.email : 'Choose a password (8 characters or more)' }));
      box.appendChild(pw);
      box.appendChild(el('button', { class: 'primary', type: 'submit', id: 'invite-accept', text: 'Join and log in' }));
      box.appendChild(err);
      box.onsubmit = function (e) {
        e.preventDefault(); err.textContent = '';
        api('POST', '/invites/accept', { token: token, name: name.value, password: pw.value }).then(function (j) {
          S.csrf = j.csrf_token; history.replaceState(null, '', location.pathname); boot(); // the token leaves the address bar
        }, function (e) { if (e.status === 404) gone(e); else err.textContent = e.message; });
      };
      (v.account ? pw : name).focus();
    }, gone);
  }

  function boot() {
    var inv = /^#\/invite\/([A-Za-z0-9_-]+)$/.exec(location.hash);
    if (inv) return showInvite(inv[1]);
    api('GET', '/me').then(function (j) {
      S.me = j.operator; S.csrf = j.csrf_token || S.csrf; S.sites = j.sites || [];
      layout(); connectWS(); route();
    }, function (e) { if (e.status !== 401) showLogin(e.message); });
  }

  // ---- layout
  var V = {};
  function layout() {
    clear(root);
    var siteSel = el('select', { id: 'site', 'aria-label': 'Site', onchange: function () { location.hash = '#/sites/' + siteSel.value; } },
      S.sites.map(function (s) { return el('option', { value: s.id, text: s.name }); }));
    V.live = el('span', { class: 'live', id: 'live' });
    var top = el('header', { class: 'top' }, [el('b', { text: 'spookat' }), siteSel,
      V.reportsLink = el('a', { href: '#', id: 'reports-link', text: 'Reports' }),
      V.settingsLink = el('a', { href: '#', id: 'settings-link', text: 'Settings' }),
      el('button', { id: 'notify-link', type: 'button', 'aria-expanded': 'false', text: 'Alerts', onclick: notifyPanel }), V.live,
      el('span', { class: 'who', text: S.me.name || S.me.email }),
      el('button', { id: 'logout', text: 'Log out', onclick: function () { api('POST', '/logout').then(function () { S.me = null; showLogin(); }); } })]);
    V.siteSel = siteSel;
    V.filters = el('div', { class: 'filters', role: 'group', 'aria-label': 'Show' }, ['open', 'snoozed', 'closed', 'all'].map(function (f) {
      return el('button', { 'data-filter': f, 'aria-pressed': 'false', text: f[0].toUpperCase() + f.slice(1), onclick: function () { S.filter = f; loadList(); } });
    }));
    V.owners = el('div', { class: 'filters owners', role: 'group', 'aria-label': 'Assigned to' }, [['me', 'Mine'], ['unassigned', 'Unassigned'], ['all', 'Everyone\u2019s']].map(function (f) {
      return el('button', { 'data-assignee': f[0], 'aria-pressed': 'false', text: f[1], onclick: function () { S.assignee = f[0]; loadList(); } });
    }));
    V.list = el('ul', { class: 'convs', id: 'conversations', 'aria-label': 'Conversations' });
    V.search = el('input', { type: 'search', id: 'search', placeholder: 'Search messages and people  /', 'aria-label': 'Search conversations', autocomplete: 'off', enterkeyhint: 'search' });
    V.search.addEventListener('input', function () { S.q = V.search.value; searchSoon(); });
    V.search.addEventListener('keydown', function (e) {
      if (e.key === 'Escape') { e.preventDefault(); V.search.value = ''; S.q = ''; loadList(); V.search.blur(); }
      else if (e.key === 'Enter') { e.preventDefault(); var a = V.list.querySelector('li[data-id] a'); if (a) { a.focus(); location.hash = a.getAttribute('href'); } }
      else if (e.key === 'ArrowDown') { e.preventDefault(); var b = V.list.querySelector('li[data-id] a'); if (b) b.focus(); }
    });
    V.since = el('select', { id: 'search-since', 'aria-label': 'Written', onchange: function () { S.since = V.since.value; loadList(); } },
      [['', 'Any time'], ['7', 'Past 7 days'], ['30', 'Past 30 days'], ['365', 'Past year']].map(function (o) { return el('option', { value: o[0], text: o[1] }); }));
    V.searchBar = el('div', { class: 'searchbar', role: 'search' }, [V.search, V.since]);
    V.main = el('main', { class: 'main', id: 'main' }, [el('p', { class: 'placeholder', text: 'Pick a conversation.' })]);
    // Errors are said here, in the page, never in a dialog that stops the operator's work.
    V.notice = el('p', { class: 'notice', id: 'notice', role: 'alert' });
    root.appendChild(top);
    root.appendChild(V.notice);
    V.layout = el('div', { class: 'layout' }, [el('nav', { class: 'side', 'aria-label': 'Conversations' }, [V.searchBar, V.filters, V.owners, V.list]), V.main]);
    root.appendChild(V.layout);
    if (!S.sites.length) { clear(V.main); V.main.appendChild(el('p', { class: 'placeholder', text: 'You are not a member of any site yet.' })); }
  }

  function route() {
    if (!S.me) return;
    var h = location.hash.replace(/^#\/?/, '').split('/');
    if (h[0] === 'conversations' && h[1]) return openConv(+h[1], h[2] === 'm' ? +h[3] : 0);
    if (!S.sites.length) return; // layout() said why there is nothing
    if (h[0] === 'sites' && h[1]) {
      if (!S.sites.some(function (x) { return x.id === +h[1]; })) { location.hash = '#/'; return; } // a site no longer (or never) one's own
      selectSite(+h[1]);
      if (h[2] === 'reports') return showReports();
      return h[2] === 'settings' ? showSettings() : placeholder();
    }
    if (S.sites.length) { selectSite(S.sites[0].id); placeholder(); }
  }
  window.addEventListener('hashchange', route);

  function placeholder() { S.conv = null; V.layout.classList.remove('has-conv', 'has-settings'); clear(V.main); V.main.appendChild(el('p', { class: 'placeholder', text: 'Pick a conversation.' })); markSel(); }

  function selectSite(id) {
    if (S.site === id) return;
    S.site = id; V.siteSel.value = String(id);
    V.settingsLink.setAttribute('href', '#/sites/' + id + '/settings');
    V.reportsLink.setAttribute('href', '#/sites/' + id + '/reports');
    V.reportsLink.hidden = myRole(id) !== 'owner'; // the site's owners' page
    loadList();
  }

  // ---- conversation list
  var listTimer = 0;
  function loadListSoon() { clearTimeout(listTimer); listTimer = setTimeout(loadList, 150); }
  function loadList() {
    if (!S.site) return;
    Array.prototype.forEach.call(V.filters.children, function (b) {
      var on = b.getAttribute('data-filter') === S.filter;
      b.classList.toggle('on', on); b.setAttribute('aria-pressed', String(on));
    });
    Array.prototype.forEach.call(V.owners.children, function (b) {
      var on = b.getAttribute('data-assignee') === S.assignee;
      b.classList.toggle('on', on); b.setAttribute('aria-pressed', String(on));
    });
    loadUnread();
    var site = S.site;
    V.layout.classList.toggle('searching', !!S.q.trim());
    if (S.q.trim()) return search(site);
    api('GET', '/sites/' + site + '/conversations?status=' + S.filter + '&assignee=' + S.assignee).then(function (j) {
      if (site !== S.site) return;
      S.convs = j.conversations; drawList(); drawTitle();
    }, function (e) { clear(V.list); V.list.appendChild(el('li', { text: e.message })); });
  }
  // ---- search: what the box holds, with the list's status and assignee filters and a time
  // range; the results replace the list until the box is emptied (Escape), and each opens
  // its conversation at the message that matched.
  var searchTimer = 0, searchSeq = 0;
  function searchSoon() { clearTimeout(searchTimer); searchTimer = setTimeout(loadList, 200); }
  function search(site) {
    var seq = ++searchSeq, q = S.q;
    var from = S.since ? '&from=' + new Date(Date.now() - S.since * 864e5).toISOString().replace(/\.\d+Z$/, 'Z') : '';
    api('GET', '/sites/' + site + '/search?q=' + encodeURIComponent(q) + '&status=' + S.filter + '&assignee=' + S.assignee + from).then(function (j) {
      if (seq === searchSeq && site === S.site) drawResults(j);
    }, function (e) {
      if (seq !== searchSeq) return;
      clear(V.list); V.list.appendChild(el('li', { class: 'empty', id: 'search-error', text: e.message }));
    });
  }
  function snippet(segs) {
    return el('div', { class: 'last snippet' }, (segs || []).map(function (g) { return g.match ? el('mark', { text: g.text }) : g.text; }));
  }
  function drawResults(j) {
    clear(V.list);
    var people = j.people || [], hits = j.hits || [];
    function item(h, href, at) {
      var c = h.conversation;
      return el('li', { 'data-id': c.id, class: 'hit' }, [el('a', { class: 'item', href: href }, [
        el('div', { class: 'row' }, [el('span', { class: 'title', text: visitorName(c) }), el('span', { class: 'badge ' + c.status, text: c.status })]),
        snippet(h.snippet),
        at ? el('div', { class: 'row' }, [el('small', { title: when(at), text: lastActive(at) })]) : null])]);
    }
    if (people.length) {
      V.list.appendChild(el('li', { class: 'group', text: 'People' }));
      people.forEach(function (h) { V.list.appendChild(item(h, '#/conversations/' + h.conversation.id, 0)); });
    }
    if (hits.length) {
      if (people.length) V.list.appendChild(el('li', { class: 'group', text: 'Messages' }));
      hits.forEach(function (h) { V.list.appendChild(item(h, '#/conversations/' + h.conversation.id + '/m/' + h.message_id, h.message_at)); });
    }
    if (!people.length && !hits.length) {
      var where = S.filter === 'all' ? '' : ' in ' + S.filter + ' conversations';
      V.list.appendChild(el('li', { class: 'empty', id: 'search-empty' }, ['No matches' + where + '. ',
        S.filter !== 'all' ? el('button', { type: 'button', text: 'Search all', onclick: function () { S.filter = 'all'; loadList(); } }) : null]));
    }
    if (j.next) V.list.appendChild(el('li', { class: 'empty', text: 'Showing the newest matches; narrow the search to find older ones.' }));
    markSel();
  }

  // Each site in the picker says how many of its open conversations are unread: "Shop (3)".
  var unreadTimer = 0;
  function unreadSoon() { clearTimeout(unreadTimer); unreadTimer = setTimeout(loadUnread, 300); }
  function loadUnread() {
    api('GET', '/unread').then(function (j) {
      (j.sites || []).forEach(function (u) { S.unread[u.site_id] = u.unread; });
      Array.prototype.forEach.call(V.siteSel.options, function (o) {
        var s = S.sites.filter(function (x) { return String(x.id) === o.value; })[0], n = S.unread[o.value] || 0;
        if (s) o.textContent = s.name + (n ? ' (' + n + ')' : '');
      });
    }, function () {});
  }
  // The site's operators, for the assignee picker (asked once a site).
  function members(site) {
    if (!S.members[site]) S.members[site] = api('GET', '/sites/' + site + '/members').then(function (j) { return j.members || []; });
    return S.members[site];
  }
  function opName(m) { return m.name || m.email; }
  // A visitor as the inbox names them: a name the page claimed without the site's signature
  // says so wherever it is shown.
  function visitorName(c) {
    var n = c.visitor_name || c.visitor_email || ('Visitor #' + c.id);
    return c.visitor_name && c.user_id && !c.verified ? n + ' (unverified)' : n;
  }
  function drawList() {
    clear(V.list);
    if (!S.convs.length) V.list.appendChild(el('li', { class: 'empty', text: 'No conversations.' }));
    S.convs.forEach(function (c) {
      var text = c.last_text || (c.last_file ? '\ud83d\udcce ' + c.last_file : '');
      var last = c.last_internal ? 'Note: ' + text : (c.last_author === 'operator' ? 'You: ' : '') + text;
      var unread = c.unread && (!S.conv || S.conv.id !== c.id);
      // A link: reached with Tab, opened with Enter; j / k and the arrows move between them.
      V.list.appendChild(el('li', { 'data-id': c.id, class: unread ? 'unread' : '' }, [el('a', { class: 'item', href: '#/conversations/' + c.id }, [
        el('div', { class: 'row' }, [el('span', { class: 'title', text: visitorName(c) }),
          unread ? el('span', { class: 'sr', text: ', unread' }) : null, el('span', { class: 'badge ' + c.status, text: c.status })]),
        el('div', { class: 'last', text: last }),
        el('div', { class: 'row' }, [el('small', { title: when(c.updated_at), text: lastActive(c.updated_at) }),
          c.status === 'snoozed' ? el('small', { class: 'snz', text: 'until ' + soon(c.snoozed_until) }) : null,
          el('small', { class: 'owner', text: c.assignee_id ? (c.assignee_id === S.me.id ? 'Mine' : c.assignee_name) : 'Unassigned' })])])]));
    });
    markSel();
  }
  function markSel() {
    if (!V.list) return;
    Array.prototype.forEach.call(V.list.children, function (li) {
      var on = !!S.conv && +li.getAttribute('data-id') === S.conv.id, a = li.querySelector('a');
      li.classList.toggle('sel', on);
      if (a) { if (on) a.setAttribute('aria-current', 'true'); else a.removeAttribute('aria-current'); }
    });
  }

  // ---- one conversation
  function openConv(id, at) {
    api('GET', '/conversations/' + id + (at ? '?limit=1000' : '')).then(function (j) {
      S.conv = j.conversation; S.msgs = {}; S.deliveries = {}; S.ctx = j.context || {};
      selectSite(j.conversation.site_id);
      (j.deliveries || []).forEach(function (d) { (S.deliveries[d.message_id] = S.deliveries[d.message_id] || {})[d.target] = d; });
      drawConv(j.messages || []);
      if (at) showFound(at);
      api('POST', '/conversations/' + id + '/read', { message_id: j.conversation.last_message_id }).then(loadListSoon, function () {});
    }, function (e) {
      S.conv = null; clear(V.main);
      V.main.appendChild(el('p', { class: 'placeholder error', id: 'conv-error', text: e.status === 404 ? 'No such conversation, or not one of your sites.' : e.message }));
    });
  }

  function drawConv(msgs) {
    var c = S.conv;
    clear(V.main);
    V.layout.classList.remove('has-settings');
    V.layout.classList.add('has-conv');
    V.status = el('span', { class: 'badge ' + c.status, id: 'conv-status', text: c.status });
    V.toggle = el('button', { id: 'conv-toggle', text: c.status === 'closed' ? 'Reopen' : 'Close', onclick: function () {
      api('POST', '/conversations/' + c.id + '/' + (S.conv.status === 'closed' ? 'reopen' : 'close')).then(function (j) { setStatus(j.status); loadListSoon(); }, showErr);
    }, title: 'Close or reopen (e)' });
    V.snooze = snoozeMenu(c);
    V.assignee = el('select', { id: 'conv-assignee', 'aria-label': 'Assigned to', onchange: function () {
      var to = +V.assignee.value;
      api('POST', '/conversations/' + c.id + '/assign', { operator_id: to }).then(function () { S.conv.assignee_id = to; loadListSoon(); },
        function (e) { V.assignee.value = String(S.conv.assignee_id || 0); showErr(e); });
    } }, [el('option', { value: '0', text: 'Unassigned' })]);
    members(c.site_id).then(function (ms) {
      ms.forEach(function (m) { V.assignee.appendChild(el('option', { value: String(m.id), text: m.id === S.me.id ? opName(m) + ' (me)' : opName(m) })); });
      V.assignee.value = String(S.conv.assignee_id || 0);
    }, function () {});
    V.msgs = el('ol', { class: 'msgs', id: 'messages' });
    var text = el('textarea', { id: 'reply', 'aria-label': 'Reply', placeholder: 'Reply to the visitor… (/ for a canned reply)', maxlength: 4000 });
    var note = el('input', { type: 'checkbox', id: 'internal', onchange: function () { form.classList.toggle('internal', note.checked); } });
    // An attachment: picked with the paperclip or pasted into the reply; uploaded at once (the
    // same checks as a visitor's), sent with the reply (which may then have no text).
    var att = null; // {id, name, size} once uploaded
    var chip = el('div', { class: 'attached', id: 'attached' });
    var picker = el('input', { type: 'file', id: 'attach-input', hidden: true, onchange: function () { if (picker.files[0]) attach(picker.files[0]); picker.value = ''; } });
    var clipBtn = el('button', { type: 'button', id: 'attach', class: 'clip', title: 'Attach a file (or paste an image)', 'aria-label': 'Attach a file', onclick: function () { picker.click(); } }, [clip()]);
    function drawChip(state, f) {
      clear(chip);
      if (!state) return;
      chip.appendChild(el('span', { class: state, text: (state === 'uploading' ? 'Uploading ' : '\ud83d\udcce ') + f.name }));
      if (state !== 'uploading') chip.appendChild(el('button', { type: 'button', class: 'drop', 'aria-label': 'Remove the attachment', text: '\u00d7', onclick: function () { att = null; drawChip(); text.focus(); } }));
    }
    function attach(blob) {
      var name = blob.name || 'pasted.png';
      drawChip('uploading', { name: name });
      var fd = new FormData(); fd.append('file', blob, name);
      fetch('/v1/api/conversations/' + c.id + '/files', { method: 'POST', body: fd, credentials: 'same-origin', headers: { 'X-CSRF-Token': S.csrf, 'Accept': 'application/json' } })
        .then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error((j && j.message) || r.statusText); return j; }); })
        .then(function (j) { att = j; drawChip('ready', j); }, function (e) { att = null; drawChip(); showErr(e); });
    }
    text.addEventListener('paste', function (e) {
      var items = (e.clipboardData && e.clipboardData.files) || [];
      if (items.length) { e.preventDefault(); attach(items[0]); }
    });
    var form = el('form', { class: 'reply', onsubmit: function (e) {
      e.preventDefault();
      var t = text.value; if (!t.trim() && !att) return;
      var btn = form.querySelector('button[type=submit]'); btn.disabled = true;
      var body = { text: t, internal: note.checked };
      if (att) body.file = att.id;
      api('POST', '/conversations/' + c.id + '/messages', body).then(function (j) {
        text.value = ''; typedAt = 0; btn.disabled = false; addMsg(j.message); drawSeen(); att = null; drawChip();
        note.checked = false; form.classList.remove('internal'); // the next reply goes to the visitor unless ticked again
      }, function (e) { btn.disabled = false; showErr(e); });
    } }, [chip, text, picker, clipBtn, el('label', {}, [note, ' Internal note']), el('button', { class: 'primary', type: 'submit', id: 'send', text: 'Send' })]);
    form.insertBefore(cannedPicker(text), text); // its keys come before the composer's own
    text.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit();
      if (e.key === 'Escape') { e.preventDefault(); focusItem(S.conv && S.conv.id); } // back to the list
    });
    // The visitor sees "<name> is typing…": said at most every 3 s while writing a reply (not a note).
    var typedAt = 0;
    text.addEventListener('input', function () {
      if (note.checked || !text.value.trim() || Date.now() - typedAt < 3000) return;
      typedAt = Date.now();
      api('POST', '/conversations/' + c.id + '/typing').catch(function () {});
    });
    V.typing = el('p', { class: 'typing', id: 'typing', 'aria-live': 'polite' });
    var who = [c.visitor_name && visitorName(c), c.visitor_email].filter(Boolean).join(' \u00b7 ') || 'Visitor #' + c.id;
    var ident = c.user_id ? el('span', { class: 'ident ' + (c.verified ? 'verified' : 'unverified'), id: 'conv-identity',
      title: c.verified ? 'Signed by the site: this is its user ' + c.user_id : 'Claimed by the page, not signed: it may not be who it says',
      text: (c.verified ? 'verified user ' : 'unverified user ') + c.user_id }) : null;
    V.rating = el('span', { class: 'rating', id: 'conv-rating' });
    var back = el('a', { class: 'back', href: '#/sites/' + c.site_id, text: '\u2039 All conversations' });
    V.main.appendChild(el('div', { class: 'head' }, [back, el('h2', { text: who }), ident, V.rating, V.assignee, V.status, V.snooze, V.toggle]));
    setStatus(c.status, c.snoozed_until);
    drawRating();
    V.info = el('details', { class: 'info', id: 'visitor-info' });
    V.info.open = window.matchMedia('(min-width: 1100px)').matches; // beside the conversation when there is room
    V.main.appendChild(V.info);
    drawInfo();
    V.main.appendChild(V.msgs);
    V.main.appendChild(V.typing);
    V.main.appendChild(form);
    msgs.forEach(addMsg);
    drawSeen();
    markSel();
  }

  // The message a search result pointed at: in view and marked for a few seconds.
  function showFound(id) {
    var li = V.msgs && V.msgs.querySelector('li.msg[data-id="' + id + '"]');
    if (!li) { showErr(new Error('That message is not shown here: it was deleted, or the conversation is longer than the 1,000 messages the inbox shows.')); return; }
    li.classList.add('found'); li.setAttribute('tabindex', '-1');
    li.scrollIntoView({ block: 'center' });
    setTimeout(function () { li.classList.remove('found'); }, 4000);
  }

  // The visitor beside the conversation: who (as the site says), where they are and started,
  // with what, their local time, and the same person's other conversations.
  function drawInfo() {
    var c = S.conv, x = S.ctx || {}, now = x.now || {}, st = x.started || {};
    if (!V.info || !c) return;
    var open = V.info.open;
    clear(V.info);
    V.info.open = open;
    V.info.appendChild(el('summary', { text: 'Visitor details' }));
    var dl = el('dl');
    function row(label, value, id) { if (value) dl.appendChild(el('div', { id: id }, [el('dt', { text: label }), el('dd', {}, [value])])); }
    function link(u, title) {
      if (!/^https?:\/\//.test(u || '')) return null;
      var bare = u.replace(/^https?:\/\//, '');
      var a = el('a', { href: u, target: '_blank', rel: 'noopener noreferrer', title: u, text: title || bare });
      return title ? el('span', {}, [a, el('small', { class: 'url', text: bare })]) : a;
    }
    row('Email', c.visitor_email, 'info-email');
    row('Name', c.visitor_name && visitorName(c), 'info-name');
    row('User id', c.user_id ? c.user_id + (c.verified ? ' (verified)' : ' (not verified)') : '', 'info-user');
    row('Now on', link(now.url, now.title), 'info-now');
    if (st.url && st.url !== now.url) row('Started on', link(st.url, st.title), 'info-started');
    row('Came from', link(now.referrer || st.referrer), 'info-referrer');
    row('Browser', now.browser || st.browser, 'info-browser');
    row('Language', now.language || st.language, 'info-language');
    var tz = now.time_zone || st.time_zone;
    if (tz) {
      var local = '';
      try { local = new Date().toLocaleTimeString([], { timeZone: tz, hour: '2-digit', minute: '2-digit' }) + ' (' + tz + ')'; } catch (e) { local = tz; }
      row('Local time', local, 'info-time');
    }
    V.info.appendChild(dl.firstChild ? dl : el('p', { class: 'hint', text: 'Nothing known yet: the page is reported once the visitor\u2019s window connects.' }));
    var earlier = x.earlier || [];
    if (earlier.length) {
      V.info.appendChild(el('h3', { text: 'Earlier conversations' }));
      V.info.appendChild(el('ul', { class: 'earlier', id: 'info-earlier' }, earlier.map(function (e) {
        return el('li', {}, [el('a', { href: '#/conversations/' + e.id }, [
          el('span', { class: 'badge ' + e.status, text: e.status }), ' ' + new Date(e.updated_at).toLocaleDateString() + ' \u00b7 ',
          el('span', { text: e.last_text || '(attachment)' }),
          e.verified ? null : el('small', { class: 'claim', text: ' same email, not verified' })])]);
      })));
    }
  }
  setInterval(function () { if (S.conv && S.ctx && V.info && document.getElementById('info-time')) drawInfo(); }, 30000);

  function drawRating() {
    var c = S.conv; if (!V.rating || !c) return;
    V.rating.textContent = c.rating ? (c.rating === 'good' ? '\ud83d\udc4d rated good' : '\ud83d\udc4e rated bad') : '';
    V.rating.title = c.rating_comment || '';
    V.rating.className = 'rating ' + (c.rating || '');
  }

  // "Seen" under the last operator reply the visitor's window has shown them.
  function drawSeen() {
    if (!V.msgs || !S.conv) return;
    var last = null;
    Array.prototype.forEach.call(V.msgs.querySelectorAll('li.msg.operator'), function (li) {
      var s = li.querySelector('.seen'); if (s) li.removeChild(s);
      if (+li.getAttribute('data-id') <= (S.conv.visitor_read_id || 0)) last = li;
    });
    if (last) last.appendChild(el('div', { class: 'seen', text: 'Seen' }));
  }

  var typingTimers = {};
  function showTyping(f) {
    if (!S.conv || f.conversation_id !== S.conv.id || !V.typing) return;
    if (f.by === 'operator' && S.me && f.operator_id === S.me.id) return; // one's own typing
    var who = f.by === 'visitor' ? 'The visitor' : (f.name || 'A teammate');
    var k = f.by + (f.operator_id || '');
    clearTimeout(typingTimers[k]);
    V.typing.textContent = who + ' is typing\u2026'; V.typing.setAttribute('data-by', f.by);
    typingTimers[k] = setTimeout(function () { stopTyping(f.by); }, 6000);
  }
  function stopTyping(by) {
    if (V.typing && (!by || V.typing.getAttribute('data-by') === by)) { V.typing.textContent = ''; V.typing.removeAttribute('data-by'); }
  }
  var noticeTimer = 0;
  function showErr(e) {
    V.notice.textContent = (e && e.message) || String(e);
    V.notice.classList.add('on');
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(function () { V.notice.classList.remove('on'); V.notice.textContent = ''; }, 8000);
  }

  // ---- keyboard: j / k or the arrows move through the list (and open), r replies, e closes
  // or reopens, Escape in the reply goes back to the list, ? lists them.
  function focusItem(id) {
    var a = id && V.list && V.list.querySelector('li[data-id="' + id + '"] a');
    if (a) a.focus();
  }
  function step(d) {
    var items = Array.prototype.slice.call(V.list.querySelectorAll('li[data-id] a'));
    if (!items.length) return;
    var at = items.indexOf(document.activeElement);
    if (at < 0 && S.conv) at = items.indexOf(V.list.querySelector('li[data-id="' + S.conv.id + '"] a'));
    var next = items[Math.max(0, Math.min(items.length - 1, at < 0 ? 0 : at + d))];
    next.focus(); location.hash = next.getAttribute('href');
  }
  document.addEventListener('keydown', function (e) {
    if (!S.me || !V.list || e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target, typing = t && (t.tagName === 'TEXTAREA' || t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.isContentEditable);
    if (typing) return;
    var k = e.key;
    if (k === 'j' || (k === 'ArrowDown' && V.list.contains(t))) { e.preventDefault(); step(1); }
    else if (k === 'k' || (k === 'ArrowUp' && V.list.contains(t))) { e.preventDefault(); step(-1); }
    else if (k === 'r' && S.conv) { e.preventDefault(); replyKey = true; } // focused on keyup: the r is not typed into it
    else if (k === 'e' && S.conv && V.toggle) { e.preventDefault(); V.toggle.click(); }
    else if (k === '?') { e.preventDefault(); keysHelp(); }
    else if (k === '/' && V.search) { e.preventDefault(); searchKey = true; } // focused on keyup, as r
  });
  var replyKey = false, searchKey = false;
  document.addEventListener('keyup', function (e) {
    if (e.key === '/' && searchKey) {
      searchKey = false;
      V.layout.classList.remove('has-conv', 'has-settings'); // on a phone, the list (and its search box) takes the screen
      V.search.focus(); V.search.select();
    }
    if (e.key !== 'r' || !replyKey) return;
    replyKey = false;
    var r = document.getElementById('reply'); if (r) r.focus();
  });
  // ---- popups (the shortcut list, the alerts panel, the snooze menu): one at a time;
  // Escape or a click outside closes it, and focus goes back to where it was.
  var popup = null; // {node, close, from}
  function openPopup(node, close, from) {
    closePopup(false);
    popup = { node: node, close: close, from: from || document.activeElement };
  }
  function closePopup(refocus) {
    var p = popup;
    popup = null;
    if (!p) return;
    p.close();
    if (refocus !== false && p.from && p.from.focus && document.body.contains(p.from)) p.from.focus();
  }
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && popup) { e.preventDefault(); e.stopPropagation(); closePopup(); }
  }, true);
  document.addEventListener('mousedown', function (e) {
    if (popup && !popup.node.contains(e.target) && !(popup.from && popup.from.contains && popup.from.contains(e.target))) closePopup(false);
  }, true);

  function keysHelp() {
    var box = document.getElementById('keys');
    if (box) { closePopup(); return; }
    box = el('div', { class: 'keys', id: 'keys', role: 'dialog', 'aria-label': 'Keyboard shortcuts' }, [el('h2', { text: 'Keyboard shortcuts' }),
      el('dl', {}, [['j or \u2193', 'next conversation'], ['k or \u2191', 'previous conversation'], ['Enter', 'open the focused conversation'],
        ['r', 'reply'], ['Ctrl+Enter', 'send the reply'], ['Escape', 'from the reply back to the list'], ['e', 'close or reopen'], ['/', 'search'], ['?', 'this list']]
        .map(function (p) { return el('div', {}, [el('dt', {}, [el('kbd', { text: p[0] })]), el('dd', { text: p[1] })]); })),
      el('button', { type: 'button', text: 'Close', onclick: function () { closePopup(); } })]);
    openPopup(box, function () { if (box.parentNode) box.parentNode.removeChild(box); });
    document.body.appendChild(box); box.querySelector('button').focus();
  }
  function setStatus(st, until) {
    S.conv.status = st; S.conv.snoozed_until = until || 0;
    V.status.textContent = st; V.status.className = 'badge ' + st; V.status.title = st === 'snoozed' ? 'Reopens by itself ' + when(until) : '';
    V.toggle.textContent = st === 'closed' ? 'Reopen' : 'Close';
    V.snooze.hidden = st === 'closed';
  }
  // Snooze: until a time, as an operator says it (in their own time zone); it reopens by
  // itself then, or when the visitor writes.
  function snoozeMenu(c) {
    var box = el('details', { class: 'snooze', id: 'conv-snooze' });

    function at(d) {
      api('POST', '/conversations/' + c.id + '/snooze', { until: d.toISOString() }).then(function (j) {
        closePopup(false); box.open = false; setStatus(j.status, j.snoozed_until); loadListSoon();
      }, showErr);
    }
    function nineOn(days) { var d = new Date(); d.setDate(d.getDate() + days); d.setHours(9, 0, 0, 0); return d; }
    var monday = (8 - new Date().getDay()) % 7 || 7;
    var custom = el('input', { type: 'datetime-local', id: 'snooze-at', 'aria-label': 'Snooze until' });
    // Its summary's click comes before the menu opens or closes: the popup is known at once.
    box.appendChild(el('summary', { text: 'Snooze', onclick: function () {
      if (!box.open) openPopup(box, function () { box.open = false; }, box.querySelector('summary'));
      else if (popup && popup.node === box) popup = null;
    } }));
    box.appendChild(el('div', { class: 'menu' }, [
      el('button', { type: 'button', 'data-snooze': '1h', text: 'For an hour', onclick: function () { at(new Date(Date.now() + 3600e3)); } }),
      el('button', { type: 'button', 'data-snooze': 'tomorrow', text: 'Until tomorrow, 9:00', onclick: function () { at(nineOn(1)); } }),
      el('button', { type: 'button', 'data-snooze': 'monday', text: 'Until Monday, 9:00', onclick: function () { at(nineOn(monday)); } }),
      el('form', { onsubmit: function (e) { e.preventDefault(); if (custom.value) at(new Date(custom.value)); } }, [custom,
        el('button', { type: 'submit', id: 'snooze-custom', text: 'Snooze' })])]));
    return box;
  }

  var EVENT = { closed: '\u2713', reopened: '\u21a9', snoozed: '\u263e', assigned: '\u2192' };
  function addMsg(m) {
    if (S.msgs[m.id]) return;
    S.msgs[m.id] = m;
    var li;
    if (EVENT[m.kind]) {
      // A status change or an assignment is a line across the conversation, not a note from someone.
      li = el('li', { class: 'msg event ' + m.kind, 'data-id': m.id }, [
        el('div', { class: 'text' }, [EVENT[m.kind] + ' ' + m.text + ' \u00b7 ', timeEl(m.created_at)]),
        el('div', { class: 'dl' })]);
    } else {
      var kind = m.internal ? 'note' : m.author;
      var who = m.author === 'visitor' ? 'Visitor' : (m.name || m.author) + (m.internal ? ' · internal note' : '');
      li = el('li', { class: 'msg ' + kind, 'data-id': m.id }, [
        el('div', { class: 'meta' }, [who + ' \u00b7 ', timeEl(m.created_at)]),
        el('div', { class: 'text', text: m.text }),
        attachment(m.file),
        el('div', { class: 'dl' })]);
    }
    var at = V.msgs.lastChild;
    while (at && (at.classList.contains('day') || +at.getAttribute('data-id') > m.id)) at = at.previousSibling;
    V.msgs.insertBefore(li, at ? at.nextSibling : V.msgs.firstChild);
    if (m.reopened) {
      V.msgs.insertBefore(el('li', { class: 'msg event reopened', 'data-id': m.id - 0.5, 'data-at': m.created_at }, [
        el('div', { class: 'text', text: '\u21a9 Reopened by the visitor\u2019s message' })]), li);
    }
    li.setAttribute('data-at', m.created_at);
    drawDays();
    drawDeliveries(m.id);
    V.msgs.scrollTop = V.msgs.scrollHeight;
  }
  // A heading over each day's messages, as in the chat window ("Today", "Yesterday", "Fri 4 Dec").
  function drawDays() {
    Array.prototype.slice.call(V.msgs.querySelectorAll('li.day')).forEach(function (d) { V.msgs.removeChild(d); });
    var last = '';
    Array.prototype.slice.call(V.msgs.children).forEach(function (li) {
      var d = new Date(+li.getAttribute('data-at')), k = d.toDateString();
      if (k === last) return;
      last = k;
      V.msgs.insertBefore(el('li', { class: 'day', text: whenDay(d, undefined, word) }), li);
    });
  }
  // An attachment: an image shown (a click opens it full size), any other file a download.
  function attachment(f) {
    if (!f) return null;
    var size = f.size < 1e3 ? f.size + ' B' : f.size < 1e6 ? Math.round(f.size / 1e3) + ' KB' : (f.size / 1e6).toFixed(1) + ' MB';
    if (/^image\/(png|jpeg|gif|webp)$/.test(f.type)) {
      return el('a', { class: 'file', href: f.url, target: '_blank', rel: 'noopener' }, [el('img', { src: f.url, alt: f.name })]);
    }
    return el('a', { class: 'file', href: f.url, download: f.name, text: '\ud83d\udcce ' + f.name + ' (' + size + ')' });
  }
  var TARGET = { slack: 'Slack', discord: 'Discord', webhook: 'Webhook', email: 'Email' };
  function drawDeliveries(id) {
    var li = V.msgs && V.msgs.querySelector('li[data-id="' + id + '"] .dl');
    if (!li) return;
    // The chips make the message taller: a list read to its end stays at its end.
    var atEnd = V.msgs.scrollHeight - V.msgs.scrollTop - V.msgs.clientHeight < 8;
    clear(li);
    var ds = S.deliveries[id] || {};
    Object.keys(ds).sort().forEach(function (t) {
      var d = ds[t], name = TARGET[t] || t;
      var label = d.status === 'delivered' ? name + ' \u2713' : d.status === 'retrying' ? name + ' retrying (' + d.attempts + ')' : name + ' dead';
      li.appendChild(el('span', { class: d.status, 'data-target': t, title: d.last_error || '', text: label + (d.status === 'dead' && d.last_error ? ': ' + d.last_error : '') }));
    });
    if (atEnd) V.msgs.scrollTop = V.msgs.scrollHeight;
  }

  // ---- live
  function connectWS() {
    if (S.ws) return;
    var ws = new WebSocket(location.origin.replace(/^http/, 'ws') + '/v1/api/ws?batch=1');
    S.ws = ws;
    ws.onopen = function () { V.live.textContent = 'Live'; V.live.title = 'Changes arrive as they happen'; V.live.setAttribute('data-state', 'live'); if (S.wsTry > 0) { loadList(); if (S.conv) openConv(S.conv.id); } S.wsTry = 0; };
    ws.onmessage = function (e) {
      var f; try { f = JSON.parse(e.data); } catch (x) { return; }
      (Array.isArray(f) ? f : [f]).forEach(onEvent); // ?batch=1: events a few ms apart share a frame
    };
    ws.onclose = function (e) {
      if (S.ws !== ws) return;
      S.ws = null; V.live.textContent = 'Reconnecting\u2026'; V.live.title = 'The live connection dropped: trying again'; V.live.setAttribute('data-state', 'down');
      if (!S.me) return;
      // 4401: this session was ended elsewhere; 4403: a site was taken away (schema/PROTOCOL.md).
      if (e.code === 4401) { S.me = null; showLogin('Your session has ended; log in again.'); return; }
      if (e.code === 4403) { S.wsTry = 0; boot(); return; }
      setTimeout(connectWS, Math.min(15000, 500 * Math.pow(2, S.wsTry++)));
    };
  }
  function onEvent(f) {
    if (f.type === 'message') {
      alertVisitor(f);
      if (S.conv && f.conversation_id === S.conv.id) {
        addMsg(f.message);
        if (f.message.author === 'visitor') stopTyping('visitor'); else if (f.message.author === 'operator') stopTyping('operator');
        drawSeen();
        if (!document.hidden) api('POST', '/conversations/' + S.conv.id + '/read', { message_id: f.message.id }).catch(function () {});
      }
      if (f.site_id === S.site) loadListSoon(); else unreadSoon();
    } else if (f.type === 'delivery') {
      var d = f.delivery;
      if (S.conv && f.conversation_id === S.conv.id) {
        (S.deliveries[d.message_id] = S.deliveries[d.message_id] || {})[d.target] = d;
        drawDeliveries(d.message_id);
      }
    } else if (f.type === 'rating') {
      if (S.conv && f.conversation_id === S.conv.id) { S.conv.rating = f.rating; S.conv.rating_comment = f.comment || ''; drawRating(); }
    } else if (f.type === 'typing') {
      showTyping(f);
    } else if (f.type === 'page') {
      if (S.conv && f.conversation_id === S.conv.id) { S.ctx.now = f.context; drawInfo(); }
    } else if (f.type === 'seen') {
      if (S.conv && f.conversation_id === S.conv.id && f.message_id > (S.conv.visitor_read_id || 0)) { S.conv.visitor_read_id = f.message_id; drawSeen(); }
    } else if (f.type === 'conversation') {
      if (S.conv && f.conversation_id === S.conv.id) setStatus(f.status, f.snoozed_until);
      if (f.site_id === S.site) loadListSoon();
    } else if (f.type === 'members') {
      delete S.members[f.site_id];
      api('GET', '/me').then(function (j) { // one's own role may be what changed
        var was = myRole(f.site_id);
        S.sites = j.sites || [];
        if (S.teamDraw) S.teamDraw(f.site_id);
        if (was !== myRole(f.site_id) && S.site === f.site_id && V.layout.classList.contains('has-settings')) showSettings();
      }, function () {});
    } else if (f.type === 'plan') {
      showErr({ message: f.message }); // the site's plan took no more new conversations this month
    } else if (f.type === 'erased') {
      if (f.site_id === S.site) loadListSoon();
      if (S.conv && S.conv.site_id === f.site_id) openConv(S.conv.id); // gone, it says so
    } else if (f.type === 'invites') {
      if (S.teamDraw) S.teamDraw(f.site_id, 'invites');
    } else if (f.type === 'canned') {
      delete S.canned[f.site_id];
      if (S.cannedDraw) S.cannedDraw(f.site_id); // the settings' list, when shown
      if (S.cannedPicker && S.conv && S.conv.site_id === f.site_id) S.cannedPicker(); // an open picker
    } else if (f.type === 'assigned') {
      if (S.conv && f.conversation_id === S.conv.id && V.assignee) { S.conv.assignee_id = f.assignee_id; V.assignee.value = String(f.assignee_id); }
      if (f.site_id === S.site) loadListSoon();
    }
  }

  // ---- notifications: what the operator hears of visitors while looking elsewhere. Set per
  // operator in this browser (desktop notifications are a browser's permission anyway).
  var BASE_TITLE = document.title;
  function notifyPrefs() {
    var p = {}; try { p = JSON.parse(localStorage.getItem('spookat.alerts.' + S.me.id) || '{}') || {}; } catch (e) { p = {}; }
    return { desktop: !!p.desktop, sound: !!p.sound, every: p.every !== false };
  }
  function saveNotifyPrefs(p) { try { localStorage.setItem('spookat.alerts.' + S.me.id, JSON.stringify(p)); } catch (e) { /* private mode */ } }
  function notifyPanel() {
    var open = document.getElementById('alerts');
    var btn = document.getElementById('notify-link');
    if (open) { closePopup(); return; }
    var p = notifyPrefs(), msg = el('p', { class: 'hint', id: 'alerts-msg', role: 'status' });
    function box(id, label, on, change) {
      var c = el('input', { type: 'checkbox', id: id }); c.checked = on;
      c.addEventListener('change', function () { change(c); });
      return el('label', { for: id }, [c, ' ' + label]);
    }
    var panel = el('div', { class: 'keys alerts', id: 'alerts', role: 'dialog', 'aria-label': 'Alerts' }, [el('h2', { text: 'Alerts' }),
      box('notify-desktop', 'Desktop notifications', p.desktop, function (c) {
        if (!c.checked) { p.desktop = false; saveNotifyPrefs(p); return; }
        if (!window.Notification) { c.checked = false; msg.textContent = 'This browser has no desktop notifications.'; return; }
        Notification.requestPermission().then(function (r) { // asked on this click, never on load
          p.desktop = r === 'granted'; c.checked = p.desktop; saveNotifyPrefs(p);
          msg.textContent = p.desktop ? 'You will be notified while this tab is open.' : 'The browser refused: allow notifications for this site in its settings.';
        });
      }),
      box('notify-sound', 'A sound', p.sound, function (c) { p.sound = c.checked; saveNotifyPrefs(p); if (c.checked) beep(); }),
      box('notify-every', 'For every visitor message (off: new conversations only)', p.every, function (c) { p.every = c.checked; saveNotifyPrefs(p); }),
      msg, el('button', { type: 'button', text: 'Close', onclick: function () { closePopup(); } })]);
    openPopup(panel, function () { if (panel.parentNode) panel.parentNode.removeChild(panel); btn.setAttribute('aria-expanded', 'false'); }, btn);
    document.body.appendChild(panel); btn.setAttribute('aria-expanded', 'true'); panel.querySelector('input').focus();
  }
  // A visitor wrote: notify unless the operator is looking at that very conversation.
  function alertVisitor(f) {
    if (!S.me || f.message.author !== 'visitor') return;
    var looking = !document.hidden && S.conv && S.conv.id === f.conversation_id;
    var p = notifyPrefs();
    if (looking || (!f.first && !p.every)) return;
    if (p.sound) beep();
    if (p.desktop && window.Notification && Notification.permission === 'granted') {
      var site = S.sites.filter(function (x) { return x.id === f.site_id; })[0];
      var n = new Notification((f.first ? 'New conversation' : 'Visitor') + (site ? ' on ' + site.name : ''), {
        body: f.message.text || (f.message.file ? '\ud83d\udcce ' + f.message.file.name : ''), tag: 'conversation-' + f.conversation_id });
      n.onclick = function () { window.focus(); location.hash = '#/conversations/' + f.conversation_id; n.close(); };
    }
  }
  function beep() {
    try {
      var A = window.AudioContext || window.webkitAudioContext, a = new A(), g = a.createGain(), x = a.createOscillator();
      x.frequency.value = 660; g.gain.value = 0.06; x.connect(g); g.connect(a.destination);
      x.start(); x.stop(a.currentTime + 0.15); x.onended = function () { a.close(); };
    } catch (e) { /* no audio here */ }
  }
  // The tab's title counts the site's conversations with unread messages: "(2) spookat inbox".
  function drawTitle() {
    var n = (S.convs || []).filter(function (c) { return c.unread && (!S.conv || S.conv.id !== c.id || document.hidden); }).length;
    document.title = (n ? '(' + n + ') ' : '') + BASE_TITLE;
  }
  document.addEventListener('visibilitychange', drawTitle);

  // ---- settings
  function myRole(site) { var r = S.sites.filter(function (x) { return x.id === site; })[0]; return r ? r.role : ''; }
  function showSettings() {
    S.conv = null; markSel();
    var id = S.site;
    if (myRole(id) !== 'owner') return agentSettings(id);
    api('GET', '/sites/' + id + '/settings').then(function (s) {
      clear(V.main);
      // On a phone the settings take the screen, as a conversation does, with a way back.
      V.layout.classList.remove('has-conv');
      V.layout.classList.add('has-settings');
      var f = {};
      function field(name, label, value, hint) {
        f[name] = el('input', { id: 'set-' + name, name: name, value: value || '' });
        return [el('label', { for: 'set-' + name, text: label }), f[name], hint ? el('div', { class: 'hint', text: hint }) : null];
      }
      function secret(name, label, isSet) {
        f[name] = el('input', { id: 'set-' + name, name: name, type: 'password', autocomplete: 'off', placeholder: isSet ? 'set (leave empty to keep)' : 'not set' });
        f['clear_' + name] = el('input', { type: 'checkbox', id: 'clear-' + name });
        return [el('label', { for: 'set-' + name, text: label }), f[name],
          isSet ? el('label', { class: 'hint' }, [f['clear_' + name], ' remove it']) : null];
      }
      var msg = el('p', { id: 'settings-msg', role: 'status' });
      var origins = el('textarea', { id: 'set-origins', rows: 3 }); origins.value = (s.origins || []).join('\n');
      var w = s.widget || {};
      function area(name, label, value, hint) {
        f[name] = el('textarea', { id: 'set-' + name, rows: 3 }); f[name].value = value || '';
        return [el('label', { for: 'set-' + name, text: label }), f[name], hint ? el('div', { class: 'hint', text: hint }) : null];
      }
      function choice(name, label, value, options) {
        f[name] = el('select', { id: 'set-' + name }, options.map(function (o) { return el('option', { value: o[0], text: o[1] }); }));
        f[name].value = value || options[0][0];
        return [el('label', { for: 'set-' + name, text: label }), f[name]];
      }
      var WIDGET = ['title', 'accent', 'position', 'launcher_label', 'greeting', 'reply_time', 'away_message', 'ask_email', 'hours', 'time_zone'];
      var form = el('form', { class: 'settings', id: 'settings', onsubmit: function (e) {
        e.preventDefault();
        var body = { name: f.name.value, origins: origins.value.split('\n').map(function (x) { return x.trim(); }).filter(Boolean),
          slack_channel: f.slack_channel.value, webhook_url: f.webhook_url.value, notify_email: f.notify_email.value, widget: {},
          retention_days: parseInt(f.retention_days.value, 10) || 0 };
        WIDGET.forEach(function (k) { if (f[k].value.trim()) body.widget[k] = f[k].value; });
        if (w.language) body.widget.language = w.language; // set through the API: this form keeps them
        if (w.strings) body.widget.strings = w.strings;
        ['slack_token', 'slack_signing_secret', 'discord_webhook', 'discord_bot_token', 'webhook_secret', 'identity_secret'].forEach(function (k) {
          if (f[k].value) body[k] = f[k].value;
          if (f['clear_' + k] && f['clear_' + k].checked) body[k] = '';
        });
        api('PUT', '/sites/' + id + '/settings', body).then(function () { msg.className = 'ok'; msg.textContent = 'Saved.'; showSettingsSoon(); },
          function (e) { msg.className = 'error'; msg.textContent = e.message; });
      } }, [].concat(
        [el('a', { class: 'back', href: '#/sites/' + id, text: '\u2039 All conversations' })],
        [el('h2', { text: 'Settings of ' + s.name })],
        [el('a', { class: 'to-reports', id: 'settings-reports', href: '#/sites/' + id + '/reports', text: 'Reports of this site \u203a' })],
        s.plan ? [el('p', { class: 'hint', id: 'settings-plan', text: 'Plan: ' + s.plan.plan + (s.plan.status ? ' (' + s.plan.status.replace('_', ' ') + ')' : '') + ' \u00b7 ' +
          s.plan.conversations + (s.plan.limits.conversations_per_month ? ' of ' + s.plan.limits.conversations_per_month : '') + ' new conversations in ' + s.plan.month +
          (s.plan.limits.operators ? ' \u00b7 up to ' + s.plan.limits.operators + ' operators' : '') +
          (s.plan.limits.retention_days_max ? ' \u00b7 kept ' + s.plan.limits.retention_days_max + ' days at most' : '') }) ] : [],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Site' })], field('name', 'Name', s.name),
          [el('label', { for: 'set-origins', text: 'Allowed origins (one per line)' }), origins, el('div', { class: 'hint', text: 'Site key: ' + s.key })]))],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Chat window' })],
          field('title', 'Title', w.title, 'Default: Chat with us'),
          field('accent', 'Accent colour', w.accent, '#rrggbb, e.g. #4f46e5'),
          choice('position', 'Position', w.position, [['right', 'Bottom right'], ['left', 'Bottom left']]),
          field('launcher_label', 'Launcher label (for screen readers)', w.launcher_label, 'Default: Open chat'),
          area('greeting', 'Greeting, shown before the visitor writes', w.greeting),
          field('reply_time', 'Shown while online', w.reply_time, 'Default: We usually answer within minutes.'),
          area('away_message', 'Shown while away', w.away_message),
          choice('ask_email', 'While away, ask for an email', w.ask_email, [['after', 'after the first message'], ['before', 'before the first message'], ['never', 'never']]),
          area('hours', 'Office hours, one rule a line', w.hours, 'e.g. mon-fri 09:00-17:30. Empty: always open. Outside them the window says away.'),
          field('time_zone', 'Time zone of the hours', w.time_zone, 'IANA name, e.g. Europe/Berlin (default UTC)'),
          [el('label', { for: 'set-snippet', text: 'Embed on your pages (the launcher\u2019s corner and colour are in it, so it draws with no request)' }),
            el('textarea', { id: 'set-snippet', rows: 2, readonly: 'readonly' })]))],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Slack' })], secret('slack_token', 'Bot token', s.slack_token_set),
          field('slack_channel', 'Channel id', s.slack_channel), secret('slack_signing_secret', 'Signing secret', s.slack_signing_secret_set)))],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Discord' })], secret('discord_webhook', 'Webhook URL', s.discord_webhook_set),
          secret('discord_bot_token', 'Bot token, for replies from Discord', s.discord_bot_token_set),
          [el('div', { class: 'hint', text: 'With a bot in your server (intents: message content), a reply in a conversation\u2019s thread, or a Discord reply to one of its posts, reaches the visitor; /close and /reopen there change its status. Setup: README, Discord.' })]))],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Webhook' })], field('webhook_url', 'URL', s.webhook_url), secret('webhook_secret', 'Secret', s.webhook_secret_set)))],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Identity verification' })], secret('identity_secret', 'Identity secret', s.identity_secret_set),
          [el('div', { class: 'hint', text: 'Your server signs each logged-in user: user_hash = hex HMAC-SHA256(this secret, user_id); the page calls spookat(\'identify\', {user_id, email, name, user_hash}). At least 16 characters.' })]))],
        [el('fieldset', {}, [].concat([el('legend', { text: 'Email' })], field('notify_email', 'Notify this address of new conversations', s.notify_email)))],
        [el('fieldset', { id: 'privacy' }, [].concat([el('legend', { text: 'Privacy' })],
          field('retention_days', 'Delete a conversation this many days after its last message', s.retention_days ? String(s.retention_days) : '',
            'Empty or 0: keep conversations. Deleted with their messages, files and visitor, within ten minutes; nothing brings them back.'),
          [personTools(id)]))],
        [el('button', { class: 'primary', type: 'submit', text: 'Save settings' }), msg]));
      f.retention_days.type = 'number'; f.retention_days.min = '0'; f.retention_days.max = '3650'; f.retention_days.inputMode = 'numeric';
      V.main.appendChild(form);
      var snippet = document.getElementById('set-snippet');
      snippet.value = '<script src="' + location.origin + '/widget.js" data-site="' + s.key + '"' +
        (w.position === 'left' ? ' data-position="left"' : '') + (w.accent ? ' data-color="' + w.accent + '"' : '') + ' async></script>';
      teamSettings(form, id);
      activity(form, id);
      cannedSettings(form, id);
      tokens(form);
    }, function (e) { clear(V.main); V.main.appendChild(el('p', { class: 'placeholder error', text: e.message })); });
  }
  var settingsTimer = 0;
  function showSettingsSoon() { clearTimeout(settingsTimer); settingsTimer = setTimeout(function () { var m = document.getElementById('settings-msg'); if (m) m.textContent = ''; }, 3000); }

  // ---- reports (owners): a span and a step, tiles of the totals, two bar charts, the
  // busiest hours, the rows per period and per operator, and the same as CSV.
  var REPORT = { days: 30, by: 'day' };
  function dur(ms) {
    if (!ms) return '\u2013';
    var s = Math.round(ms / 1000);
    return s < 60 ? s + ' s' : s < 3600 ? Math.round(s / 60) + ' min' : s < 86400 ? (s / 3600).toFixed(1) + ' h' : (s / 86400).toFixed(1) + ' d';
  }
  function bars(title, rows, value, fmt) {
    var W = 640, H = 150, pad = 24, n = rows.length || 1, bw = (W - pad) / n;
    var max = Math.max.apply(null, rows.map(value).concat([1]));
    var NS = 'http://www.w3.org/2000/svg';
    var svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + (H + 18)); svg.setAttribute('class', 'chart'); svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', title);
    function node(tag, attrs, text) { var e = document.createElementNS(NS, tag); Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); }); if (text != null) e.textContent = text; svg.appendChild(e); return e; }
    node('text', { x: 0, y: 10, class: 'axis' }, fmt(max));
    node('line', { x1: pad, y1: H, x2: W, y2: H, class: 'base' });
    rows.forEach(function (r, i) {
      var v = value(r), h = Math.round((H - 14) * v / max);
      var rect = node('rect', { x: pad + i * bw + 1, y: H - h, width: Math.max(1, bw - 2), height: h });
      var tip = document.createElementNS(NS, 'title'); tip.textContent = r.label + ': ' + fmt(v); rect.appendChild(tip);
      if (n <= 16 || i % Math.ceil(n / 8) === 0) node('text', { x: pad + i * bw + bw / 2, y: H + 14, class: 'tick' }, r.label.slice(5));
    });
    return el('figure', { class: 'report-chart' }, [el('figcaption', { text: title }), svg]);
  }
  function heat(hours) {
    var max = 1; hours.forEach(function (d) { d.forEach(function (n) { max = Math.max(max, n); }); });
    var days = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
    var t = el('table', { class: 'heat', id: 'report-hours' }, [el('tr', {}, [el('th')].concat(Array.from({ length: 24 }, function (_, h) { return el('th', { text: h % 3 ? '' : String(h) }); })))]);
    hours.forEach(function (d, i) {
      t.appendChild(el('tr', {}, [el('th', { text: days[i] })].concat(d.map(function (n, h) {
        var td = el('td', { title: days[i] + ' ' + h + ':00 \u2013 ' + n + ' visitor messages' });
        td.style.background = n ? 'rgba(79,70,229,' + (0.12 + 0.88 * n / max).toFixed(2) + ')' : '';
        return td;
      }))));
    });
    return t;
  }
  function showReports() {
    S.conv = null; markSel();
    var id = S.site;
    clear(V.main);
    V.layout.classList.remove('has-conv');
    V.layout.classList.add('has-settings');
    if (myRole(id) !== 'owner') { V.main.appendChild(el('p', { class: 'placeholder', text: 'Reports are for the site\u2019s owners.' })); return; }
    var page = el('div', { class: 'settings reports', id: 'reports' });
    V.main.appendChild(page);
    var days = el('select', { id: 'report-days', 'aria-label': 'Span', onchange: function () { REPORT.days = +days.value; load(); } },
      [[7, 'Last 7 days'], [30, 'Last 30 days'], [90, 'Last 90 days'], [365, 'Last year']].map(function (o) { return el('option', { value: o[0], text: o[1] }); }));
    var by = el('select', { id: 'report-by', 'aria-label': 'Step', onchange: function () { REPORT.by = by.value; load(); } },
      [['day', 'By day'], ['week', 'By week']].map(function (o) { return el('option', { value: o[0], text: o[1] }); }));
    days.value = String(REPORT.days); by.value = REPORT.by;
    var body = el('div', { id: 'report-body' }, [el('p', { class: 'hint', text: 'Counting\u2026' })]);
    var csvP = el('a', { id: 'report-csv', text: 'CSV by period' }), csvO = el('a', { id: 'report-csv-ops', text: 'CSV by operator' });
    var site = S.sites.filter(function (x) { return x.id === id; })[0] || { name: '' };
    page.appendChild(el('a', { class: 'back', href: '#/sites/' + id, text: '\u2039 All conversations' }));
    page.appendChild(el('h2', { text: 'Reports of ' + site.name }));
    page.appendChild(el('div', { class: 'report-controls' }, [days, by, csvP, csvO]));
    page.appendChild(body);
    function load() {
      var to = new Date(), from = new Date(Date.now() - (REPORT.days - 1) * 864e5);
      var d = function (x) { return x.toISOString().slice(0, 10); };
      var qs = '?from=' + d(from) + '&to=' + d(to) + '&by=' + REPORT.by;
      csvP.href = '/v1/api/sites/' + id + '/reports.csv' + qs; csvO.href = csvP.href + '&rows=operators';
      api('GET', '/sites/' + id + '/reports' + qs).then(function (r) {
        clear(body);
        var t = r.total;
        function tile(label, value, sub, tid) { return el('div', { class: 'tile', id: tid }, [el('small', { text: label }), el('b', { text: value }), sub ? el('small', { text: sub }) : null]); }
        body.appendChild(el('div', { class: 'tiles' }, [
          tile('Conversations', String(t.conversations), t.visitor_messages + ' visitor messages, ' + t.operator_messages + ' replies', 'tile-conversations'),
          tile('First response', dur(t.first_response.median_ms), 'median; 90% within ' + dur(t.first_response.p90_ms), 'tile-first-response'),
          tile('Resolution', dur(t.resolution.median_ms), 'median; 90% within ' + dur(t.resolution.p90_ms), 'tile-resolution'),
          tile('Ratings', t.rated_good + ' good \u00b7 ' + t.rated_bad + ' bad', (t.rated_good + t.rated_bad) ? Math.round(100 * t.rated_good / (t.rated_good + t.rated_bad)) + '% good' : 'none yet', 'tile-ratings')]));
        body.appendChild(bars('Conversations started', r.buckets, function (b) { return b.conversations; }, String));
        body.appendChild(bars('First response, median', r.buckets, function (b) { return b.first_response.median_ms; }, dur));
        body.appendChild(el('h3', { text: 'Busiest hours (visitor messages, ' + r.time_zone + ')' }));
        body.appendChild(heat(r.hours));
        function table(tid, head, rows) {
          return el('table', { class: 'report-table', id: tid }, [el('tr', {}, [head, 'Conversations', 'Visitor msgs', 'Replies', 'First response (median / p90)', 'Resolution (median / p90)', 'Good / bad']
            .map(function (h) { return el('th', { text: h }); }))].concat(rows.map(function (x) {
            return el('tr', {}, [x.label, x.conversations, x.visitor_messages, x.operator_messages, dur(x.first_response.median_ms) + ' / ' + dur(x.first_response.p90_ms),
              dur(x.resolution.median_ms) + ' / ' + dur(x.resolution.p90_ms), x.rated_good + ' / ' + x.rated_bad].map(function (v) { return el('td', { text: String(v) }); }));
          })));
        }
        body.appendChild(el('h3', { text: 'By operator' }));
        body.appendChild(table('report-operators', 'Operator', r.operators));
        body.appendChild(el('h3', { text: REPORT.by === 'week' ? 'By week' : 'By day' }));
        body.appendChild(table('report-periods', REPORT.by === 'week' ? 'Week of' : 'Day', r.buckets.slice().reverse()));
      }, function (e) { clear(body); body.appendChild(el('p', { class: 'error', text: e.message })); });
    }
    load();
  }

  // A person's data (owners): export it, or erase it to the bytes, by email, user id or
  // visitor number. Not part of the settings form: its buttons act at once.
  function personTools(site) {
    var kind = el('select', { id: 'person-kind', 'aria-label': 'Find the person by' }, [['email', 'Email'], ['user', 'User id'], ['visitor', 'Visitor #']].map(function (o) { return el('option', { value: o[0], text: o[1] }); }));
    var who = el('input', { id: 'person-who', placeholder: 'zoe@example.com', autocomplete: 'off' });
    who.addEventListener('keydown', function (e) { if (e.key === 'Enter') e.preventDefault(); }); // not the settings form's submit
    var out = el('p', { id: 'person-msg', role: 'status' });
    function query() { return kind.value + '=' + encodeURIComponent(who.value.trim().replace(/^#/, '')); }
    var exp = el('button', { type: 'button', id: 'person-export', text: 'Export their data', onclick: function () {
      if (!who.value.trim()) { out.className = 'error'; out.textContent = 'Say who: an email, a user id or a visitor number.'; return; }
      // A download: the browser saves the archive (the session cookie goes with a GET).
      var a = el('a', { href: '/v1/api/sites/' + site + '/people/export?' + query(), download: '' }); document.body.appendChild(a); a.click(); a.remove();
      out.className = 'ok'; out.textContent = 'The archive downloads (person.json and their files). If nobody matches, the browser says so.';
    } });
    var erase = el('button', { type: 'button', id: 'person-erase', class: 'del', text: 'Erase them\u2026', onclick: function () {
      if (!who.value.trim()) { out.className = 'error'; out.textContent = 'Say who: an email, a user id or a visitor number.'; return; }
      if (erase.getAttribute('data-sure') !== '1') { erase.setAttribute('data-sure', '1'); erase.textContent = 'Erase ' + who.value.trim() + ' for good?'; return; }
      erase.removeAttribute('data-sure'); erase.textContent = 'Erase them\u2026';
      api('DELETE', '/sites/' + site + '/people?' + query()).then(function (j) {
        var e = j.erased, gone = e.delivered.length ? ' Already delivered, not unsent: ' + e.delivered.map(function (d) { return d.target + (d.thread ? ' thread ' + d.thread : d.external_id ? ' ' + d.external_id : ''); }).join(', ') + '.' : '';
        out.className = 'ok';
        if (S.activityLoad) S.activityLoad(site);
        out.textContent = 'Erased: ' + e.visitors + ' visitor record(s), ' + e.conversations + ' conversation(s), ' + e.messages + ' message(s), ' + e.files + ' file(s).' + gone;
        who.value = '';
      }, function (e) { out.className = 'error'; out.textContent = e.message; });
    } });
    return el('div', { class: 'person' }, [el('label', { for: 'person-who', text: 'A person\u2019s data' }),
      el('div', { class: 'row' }, [kind, who, exp, erase]), out,
      el('div', { class: 'hint', text: 'Export gives them everything this site holds about them; erase deletes it here for good (what went to Slack, Discord, webhooks or email cannot be unsent: the answer lists it).' })]);
  }

  // ---- the audit log (owners): who did what, newest first, filtered by action, operator and
  // dates; "Older" pages on.
  var ACTIONS = { login: 'logged in', login_failed: 'failed to log in', logout: 'logged out', password_changed: 'changed their password',
    settings_changed: 'changed settings', role_changed: 'changed a role', member_removed: 'removed a member', invite_created: 'invited',
    invite_withdrawn: 'withdrew an invitation', invite_accepted: 'joined by invitation', token_created: 'made an API token',
    token_deleted: 'revoked an API token', person_exported: 'exported a person\u2019s data', person_erased: 'erased a person',
    retention_changed: 'changed the retention', member_added: 'added a member', operator_added: 'added an operator', operator_removed: 'removed an operator' };
  function activity(form, site) {
    var ul = el('ul', { class: 'team-list', id: 'audit-list' });
    var what = el('select', { id: 'audit-action', 'aria-label': 'Action', onchange: function () { load(); } },
      [el('option', { value: '', text: 'Every action' })].concat(Object.keys(ACTIONS).map(function (k) { return el('option', { value: k, text: ACTIONS[k] }); })));
    var who = el('select', { id: 'audit-operator', 'aria-label': 'Operator', onchange: function () { load(); } }, [el('option', { value: '', text: 'Everyone' })]);
    members(site).then(function (ms) { ms.forEach(function (m) { who.appendChild(el('option', { value: String(m.id), text: opName(m) })); }); }, function () {});
    var from = el('input', { type: 'date', id: 'audit-from', onchange: function () { load(); } });
    var to = el('input', { type: 'date', id: 'audit-to', onchange: function () { load(); } });
    var more = el('button', { type: 'button', id: 'audit-more', text: 'Older', hidden: true, onclick: function () { load(more.getAttribute('data-before')); } });
    function detail(e) {
      var d = e.detail || {};
      if (d.fields) return d.fields.join(', ');
      if (d.by) return 'by ' + d.by.replace('_', ' ') + (d.conversations != null ? ', ' + d.conversations + ' conversation(s)' : '');
      if (d.email) return d.email + (d.role ? ' as ' + d.role : '');
      if (d.role) return d.role;
      if (d.days != null) return d.days ? d.days + ' days' : 'kept';
      return '';
    }
    function query(before) {
      var q = [];
      if (what.value) q.push('action=' + what.value);
      if (who.value) q.push('operator=' + who.value);
      // The dates are the operator's own days: sent as times with their zone.
      if (from.value) q.push('from=' + encodeURIComponent(new Date(from.value + 'T00:00:00').toISOString()));
      if (to.value) q.push('to=' + encodeURIComponent(new Date(to.value + 'T23:59:59.999').toISOString()));
      if (before) q.push('before=' + before);
      return q.length ? '?' + q.join('&') : '';
    }
    function load(before) {
      api('GET', '/sites/' + site + '/audit' + query(before)).then(function (j) {
        if (!before) clear(ul);
        if (!j.entries.length && !before) ul.appendChild(el('li', { class: 'hint', text: 'Nothing matches.' }));
        j.entries.forEach(function (e) {
          ul.appendChild(el('li', { 'data-action': e.action }, [el('span', { class: 'who' }, [el('b', { text: e.actor }), ' ' + (ACTIONS[e.action] || e.action) + ' ',
            el('small', { text: detail(e) })]), el('small', { title: e.address || '', text: when(e.at) + (e.address ? ' \u00b7 ' + e.address : '') })]));
        });
        more.hidden = !j.next;
        if (j.next) more.setAttribute('data-before', j.next);
      }, function (e) { clear(ul); ul.appendChild(el('li', { class: 'error', text: e.message })); });
    }
    var box = el('fieldset', { id: 'activity' }, [el('legend', { text: 'Activity' }),
      el('p', { class: 'hint', text: 'Who did what on this site, newest first: logins, settings (which fields, never their values), the team, people\u2019s data. Kept a year.' }),
      el('div', { class: 'row audit-filters' }, [what, who, el('label', {}, ['From ', from]), el('label', {}, ['to ', to])]), ul, more]);
    form.parentNode.appendChild(el('div', { class: 'settings' }, [box]));
    S.activityLoad = function (changed) { if (changed === site && document.body.contains(ul)) load(); };
    load();
  }

  // An agent's settings: what is theirs to change (canned replies, their API tokens), and who
  // to ask for the rest.
  function agentSettings(id) {
    clear(V.main);
    V.layout.classList.remove('has-conv');
    V.layout.classList.add('has-settings');
    var site = S.sites.filter(function (x) { return x.id === id; })[0] || { name: '' };
    var head = el('div', { class: 'settings', id: 'settings-agent' }, [el('a', { class: 'back', href: '#/sites/' + id, text: '\u2039 All conversations' }),
      el('h2', { text: 'Settings of ' + site.name }),
      el('p', { class: 'notice-inline', id: 'owners-only', text: 'Only the site\u2019s owners change its settings, channels and team. Here you can keep the canned replies and your API tokens.' })]);
    V.main.appendChild(head);
    cannedSettings(head, id);
    tokens(head);
  }

  // ---- the team (owners): members and their roles, and invitations.
  function teamSettings(form, site) {
    var ul = el('ul', { class: 'team-list', id: 'team-list' });
    var msg = el('p', { id: 'team-msg', role: 'status' });
    function say(e) { msg.className = e ? 'error' : 'ok'; msg.textContent = e ? e.message : 'Saved.'; }
    function draw() {
      delete S.members[site];
      members(site).then(function (ms) {
        clear(ul);
        ms.forEach(function (m) {
          var role = el('select', { 'aria-label': 'Role of ' + opName(m), class: 'role', onchange: function () {
            api('PUT', '/sites/' + site + '/members/' + m.id, { role: role.value }).then(function () { say(); }, function (e) { role.value = m.role; say(e); });
          } }, [el('option', { value: 'owner', text: 'Owner' }), el('option', { value: 'agent', text: 'Agent' })]);
          role.value = m.role;
          var rm = el('button', { type: 'button', class: 'del', text: m.id === S.me.id ? 'Leave' : 'Remove', onclick: function () {
            if (rm.getAttribute('data-sure') !== '1') { rm.setAttribute('data-sure', '1'); rm.textContent = m.id === S.me.id ? 'Leave this site?' : 'Remove ' + opName(m) + '?'; return; }
            api('DELETE', '/sites/' + site + '/members/' + m.id).then(function () { say(); }, function (e) { rm.removeAttribute('data-sure'); rm.textContent = 'Remove'; say(e); });
          } });
          ul.appendChild(el('li', { 'data-id': m.id }, [el('span', { class: 'who' }, [el('b', { text: opName(m) + (m.id === S.me.id ? ' (you)' : '') }), ' ', el('small', { text: m.email })]),
            el('span', {}, [role, ' ', rm])]));
        });
      }, function (e) { clear(ul); ul.appendChild(el('li', { class: 'error', text: e.message })); });
    }
    // Invitations: made here, mailed by the worker; the link is shown once, to pass on by hand
    // when mail does not reach.
    var invUl = el('ul', { class: 'team-list', id: 'invite-list' });
    var email = el('input', { type: 'email', id: 'invite-email', placeholder: 'name@example.com', autocomplete: 'off' });
    var irole = el('select', { id: 'invite-role', 'aria-label': 'Role of the invitee' }, [el('option', { value: 'agent', text: 'Agent' }), el('option', { value: 'owner', text: 'Owner' })]);
    var sent = el('div', { id: 'invite-sent' });
    var STATUS = { queued: 'email queued', delivered: 'email sent', retrying: 'email retrying', dead: 'email failed' };
    function drawInvites() {
      api('GET', '/sites/' + site + '/invites').then(function (j) {
        clear(invUl);
        (j.invites || []).forEach(function (v) {
          var expired = v.expires_at < Date.now();
          var st = expired ? 'expired' : (STATUS[v.status] || v.status);
          invUl.appendChild(el('li', { 'data-id': v.id }, [el('span', { class: 'who' }, [el('b', { text: v.email }), ' ',
            el('small', { text: v.role + ' \u00b7 ' + st + (v.last_error && !expired ? ': ' + v.last_error : '') + (expired ? '' : ' \u00b7 until ' + soon(v.expires_at)) })]),
            el('button', { type: 'button', class: 'del', text: 'Withdraw', onclick: function () { api('DELETE', '/sites/' + site + '/invites/' + v.id).then(function () {}, say); } })]));
        });
      }, function () {});
    }
    var invite = el('form', { class: 'invite', id: 'invite-form', onsubmit: function (e) {
      e.preventDefault();
      api('POST', '/sites/' + site + '/invites', { email: email.value, role: irole.value }).then(function (j) {
        email.value = ''; msg.textContent = '';
        var link = el('input', { readonly: 'readonly', id: 'invite-link', value: j.link, 'aria-label': 'Invitation link' });
        clear(sent);
        sent.appendChild(el('p', { class: 'ok', text: 'Invited ' + j.invite.email + ': the link is on its way by email. It works once, for 72 hours; shown here once, to pass on yourself if you prefer:' }));
        sent.appendChild(el('div', { class: 'row' }, [link, el('button', { type: 'button', text: 'Copy', onclick: function () { link.select(); try { navigator.clipboard.writeText(j.link); } catch (x) { document.execCommand('copy'); } } })]));
      }, say);
    } }, [el('label', { for: 'invite-email', text: 'Invite by email' }), el('div', { class: 'row' }, [email, irole, el('button', { class: 'primary', type: 'submit', id: 'invite-send', text: 'Invite' })])]);
    S.teamDraw = function (changed, what) {
      if (changed !== site || !document.body.contains(ul)) return;
      if (what === 'invites') drawInvites(); else draw();
    };
    var box = el('fieldset', { id: 'team' }, [el('legend', { text: 'Team' }),
      el('p', { class: 'hint', text: 'Owners change the settings, channels and team; agents answer. A site keeps at least one owner. Removing someone closes their inbox at once.' }),
      ul, msg, invite, sent, el('h3', { text: 'Invitations not yet used' }), invUl]);
    form.parentNode.appendChild(el('div', { class: 'settings' }, [box]));
    draw();
    drawInvites();
    return box;
  }

  // ---- canned replies: the site's shared answers, kept in its settings and inserted in the
  // composer by typing / and a few letters of the title (arrows pick, Enter or Tab inserts,
  // Escape closes). Their placeholders are filled in here, before the operator sends.
  S.canned = {};
  function cannedList(site) {
    if (!S.canned[site]) {
      S.canned[site] = api('GET', '/sites/' + site + '/canned').then(function (j) { return j.canned || []; },
        function (e) { delete S.canned[site]; throw e; });
    }
    return S.canned[site];
  }
  // {{visitor.name}}, {{visitor.first_name}}, {{visitor.email}}, {{operator.name}},
  // {{operator.first_name}}; {{visitor.first_name|there}} says "there" when it is not known.
  function fillCanned(text, c) {
    var vn = (c && c.visitor_name) || '', on = (S.me && (S.me.name || S.me.email)) || '';
    var v = { 'visitor.name': vn, 'visitor.first_name': vn.split(/\s+/)[0], 'visitor.email': (c && c.visitor_email) || '',
      'operator.name': on, 'operator.first_name': on.split(/\s+/)[0] };
    return text.replace(/\{\{\s*([a-z_]+\.[a-z_]+)\s*(?:\|([^}]*))?\}\}/g, function (all, k, fb) {
      return Object.prototype.hasOwnProperty.call(v, k) ? (v[k] || (fb || '').trim()) : all;
    });
  }
  function cannedPicker(text) {
    var box = el('ul', { class: 'canned-pick', id: 'canned-pick', role: 'listbox', 'aria-label': 'Canned replies' });
    box.hidden = true;
    text.setAttribute('aria-controls', 'canned-pick'); text.setAttribute('aria-autocomplete', 'list');
    var items = [], at = 0, asked = '';
    // "/words" before the caret, at the start of the reply or after a space: what is being looked for.
    function query() {
      var v = text.value, end = text.selectionStart, i = v.lastIndexOf('/', end - 1);
      if (i < 0 || (i > 0 && !/\s/.test(v[i - 1]))) return null;
      var q = v.slice(i + 1, end);
      return /\n/.test(q) || q.length > 40 ? null : { from: i, to: end, q: q.toLowerCase() };
    }
    function close() { box.hidden = true; items = []; text.setAttribute('aria-expanded', 'false'); text.removeAttribute('aria-activedescendant'); }
    function draw(list, q) {
      var starts = [], inside = [];
      list.forEach(function (r) {
        var t = r.title.toLowerCase();
        if (t.indexOf(q.q) === 0) starts.push(r); else if (t.indexOf(q.q) > 0 || r.text.toLowerCase().indexOf(q.q) >= 0) inside.push(r);
      });
      items = starts.concat(inside).slice(0, 8);
      at = Math.min(at, Math.max(0, items.length - 1));
      clear(box);
      if (!items.length) box.appendChild(el('li', { class: 'none', text: list.length ? 'No canned reply matches \u201c' + q.q + '\u201d.' : 'No canned replies yet: add them in Settings.' }));
      items.forEach(function (r, i) {
        box.appendChild(el('li', { role: 'option', id: 'canned-' + r.id, 'aria-selected': String(i === at), class: i === at ? 'on' : '',
          onmousedown: function (e) { e.preventDefault(); at = i; pick(); } }, [el('b', { text: r.title }), el('span', { text: fillCanned(r.text, S.conv) })]));
      });
      box.hidden = false; text.setAttribute('aria-expanded', 'true');
      if (items[at]) text.setAttribute('aria-activedescendant', 'canned-' + items[at].id);
    }
    function update() {
      var q = query();
      if (!q || !S.conv) return close();
      asked = q.q;
      cannedList(S.conv.site_id).then(function (list) { var now = query(); if (now && now.q === asked) draw(list, now); }, close);
    }
    function pick() {
      var q = query(), r = items[at];
      if (!q || !r) return close();
      var fill = fillCanned(r.text, S.conv);
      text.value = text.value.slice(0, q.from) + fill + text.value.slice(q.to);
      text.setSelectionRange(q.from + fill.length, q.from + fill.length);
      close();
      text.dispatchEvent(new Event('input'));
    }
    text.addEventListener('input', function () { at = 0; update(); });
    text.addEventListener('blur', close);
    // The Enter that picked must not also break the line: a browser that sends its character
    // apart from the key (a remote-control protocol, some IMEs) still would, so it is dropped
    // until the key comes up.
    var swallow = false;
    text.addEventListener('beforeinput', function (e) { if (swallow) { swallow = false; e.preventDefault(); } });
    text.addEventListener('keyup', function () { swallow = false; });
    text.addEventListener('keydown', function (e) {
      if (box.hidden) return;
      var n = items.length;
      if ((e.key === 'ArrowDown' || e.key === 'ArrowUp') && n) {
        e.preventDefault(); at = (at + (e.key === 'ArrowDown' ? 1 : n - 1)) % n; update();
      } else if ((e.key === 'Enter' && !e.ctrlKey && !e.metaKey && !e.shiftKey) || e.key === 'Tab') {
        if (n) { e.preventDefault(); e.stopImmediatePropagation(); swallow = true; pick(); }
      } else if (e.key === 'Escape') { e.preventDefault(); e.stopImmediatePropagation(); close(); }
    });
    S.cannedPicker = function () { if (!box.hidden) update(); }; // a change of the list redraws an open picker
    return box;
  }
  function cannedSettings(form, site) {
    var ul = el('ul', { class: 'canned-list', id: 'canned-list' });
    var title = el('input', { id: 'canned-title', maxlength: 80, placeholder: 'e.g. Refund policy' });
    var text = el('textarea', { id: 'canned-text', rows: 3, maxlength: 4000, placeholder: 'Hi {{visitor.first_name|there}}, \u2026' });
    var msg = el('p', { id: 'canned-msg', role: 'status' });
    var editing = 0;
    var save = el('button', { type: 'button', class: 'primary', id: 'canned-save', text: 'Add canned reply', onclick: function () {
      api(editing ? 'PUT' : 'POST', '/sites/' + site + '/canned' + (editing ? '/' + editing : ''), { title: title.value, text: text.value })
        .then(function () { reset(); msg.className = 'ok'; msg.textContent = 'Saved.'; }, function (e) { msg.className = 'error'; msg.textContent = e.message; });
    } });
    var cancel = el('button', { type: 'button', id: 'canned-cancel', text: 'Cancel', onclick: function () { reset(); } });
    cancel.hidden = true;
    function reset() { editing = 0; title.value = ''; text.value = ''; save.textContent = 'Add canned reply'; cancel.hidden = true; msg.textContent = ''; }
    function draw() {
      cannedList(site).then(function (list) {
        clear(ul);
        if (!list.length) ul.appendChild(el('li', { class: 'hint', text: 'None yet.' }));
        list.forEach(function (r) {
          var del = el('button', { type: 'button', class: 'del', text: 'Delete', onclick: function () {
            if (del.getAttribute('data-sure') !== '1') { del.setAttribute('data-sure', '1'); del.textContent = 'Delete for everyone?'; return; }
            api('DELETE', '/sites/' + site + '/canned/' + r.id).then(function () { if (editing === r.id) reset(); }, showErr);
          } });
          ul.appendChild(el('li', { 'data-id': r.id }, [el('div', { class: 'row' }, [el('b', { text: r.title }),
            el('span', {}, [el('button', { type: 'button', class: 'edit', text: 'Edit', onclick: function () {
              editing = r.id; title.value = r.title; text.value = r.text; save.textContent = 'Save changes'; cancel.hidden = false; title.focus();
            } }), ' ', del])]), el('div', { class: 'text', text: r.text }),
            el('small', { class: 'hint', text: (r.updated_by ? r.updated_by + ', ' : '') + when(r.updated_at) })]));
        });
      }, function (e) { clear(ul); ul.appendChild(el('li', { class: 'error', text: e.message })); });
    }
    S.cannedDraw = function (changed) { if (changed === site && document.body.contains(ul)) draw(); };
    var box = el('fieldset', { id: 'canned' }, [el('legend', { text: 'Canned replies' }),
      el('p', { class: 'hint', text: 'Shared by the site\u2019s operators. In a reply, type / and a few letters of the title, then Enter. ' +
        'In the text, {{visitor.name}}, {{visitor.first_name}}, {{visitor.email}}, {{operator.name}} and {{operator.first_name}} are filled in; ' +
        '{{visitor.first_name|there}} says \u201cthere\u201d when the name is not known.' }),
      ul, el('label', { for: 'canned-title', text: 'Title' }), title, el('label', { for: 'canned-text', text: 'Text' }), text,
      el('div', { class: 'actions' }, [save, ' ', cancel]), msg]);
    form.parentNode.appendChild(el('div', { class: 'settings' }, [box]));
    draw();
  }

  function tokens(form) {
    var box = el('fieldset', { id: 'tokens' }, [el('legend', { text: 'Your API tokens (for /v1/api/)' })]);
    var ul = el('ul'), shown = el('p', { class: 'hint' });
    var name = el('input', { placeholder: 'token name', id: 'token-name' });
    box.appendChild(ul);
    box.appendChild(el('div', {}, [name, el('button', { type: 'button', id: 'token-new', text: 'New token', onclick: function () {
      api('POST', '/tokens', { name: name.value }).then(function (j) { shown.textContent = 'Copy it now, it is shown once: ' + j.token; load(); }, showErr);
    } })]));
    box.appendChild(shown);
    form.parentNode.appendChild(el('div', { class: 'settings' }, [box]));
    function load() {
      api('GET', '/tokens').then(function (j) {
        clear(ul);
        j.tokens.forEach(function (t) {
          ul.appendChild(el('li', {}, [(t.name || 'token') + ' (created ' + when(t.created_at) + ') ',
            el('button', { type: 'button', text: 'Revoke', onclick: function () { api('DELETE', '/tokens/' + t.id).then(load, showErr); } })]));
        });
      });
    }
    load();
  }

  boot();
})();
