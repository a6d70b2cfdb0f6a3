/* spookat chat window. Loaded by widget.js on the visitor's first sign of intent; draws the
 * window inside the launcher's shadow root (styles isolated both ways) and speaks the widget
 * websocket protocol (schema/PROTOCOL.md). Every text from the network is set with
 * textContent, never parsed as HTML. */
(function () {
  'use strict';
  var CSS = [
    ':host{all:initial}',
    '.panel{position:fixed;right:20px;bottom:88px;width:360px;height:520px;max-height:calc(100vh - 110px);display:none;flex-direction:column;',
    'background:#fff;color:#111827;border-radius:14px;box-shadow:0 12px 40px rgba(0,0,0,.28);z-index:2147483001;overflow:hidden;',
    'font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}',
    '.panel.open{display:flex}',
    'header{display:flex;align-items:center;justify-content:space-between;padding:12px 14px;background:#4f46e5;color:#fff}',
    'header b{font-size:15px}header button{background:none;border:0;color:#fff;font-size:22px;line-height:1;cursor:pointer;padding:2px 6px}',
    '.conn{font-size:12px;opacity:.85;margin-left:8px}',
    '.banner,.offline{display:none;padding:8px 12px;background:#fef3c7;color:#78350f;font-size:13px}.banner.on,.offline.on{display:block}',
    '.gone{display:none;margin:auto;padding:24px;text-align:center;color:#4b5563}.dead>.gone{display:block}',
    '.dead>ol,.dead>form,.dead>.email,.dead>.banner,.dead>.offline{display:none!important}',
    'ol{list-style:none;margin:0;padding:12px;flex:1;overflow-y:auto;display:flex;flex-direction:column;gap:8px}',
    'li{max-width:80%;display:flex;flex-direction:column}',
    'li.me{align-self:flex-end;align-items:flex-end}li.them{align-self:flex-start}',
    '.bubble{padding:8px 11px;border-radius:12px;white-space:pre-wrap;word-wrap:break-word;overflow-wrap:anywhere}',
    'li.me .bubble{background:#4f46e5;color:#fff}li.them .bubble{background:#f3f4f6}',
    'li.system .bubble{background:none;color:#6b7280;font-style:italic}',
    '.who{font-size:12px;color:#6b7280;margin:0 4px 2px}',
    '.state{font-size:11px;color:#6b7280;margin:2px 4px 0}.failed .state{color:#b91c1c}',
    '.state button{margin-left:6px;font-size:11px;border:1px solid #b91c1c;color:#b91c1c;background:#fff;border-radius:6px;cursor:pointer;padding:1px 6px}',
    '.state button:disabled{opacity:.5;cursor:default}',
    '.empty{color:#6b7280;text-align:center;margin:auto 0}',
    'form{display:flex;gap:8px;padding:10px;border-top:1px solid #e5e7eb}',
    'textarea,input{flex:1;resize:none;border:1px solid #d1d5db;border-radius:8px;padding:8px;font:inherit;min-width:0}',
    'form button{border:0;border-radius:8px;background:#4f46e5;color:#fff;padding:0 14px;cursor:pointer;font:inherit}',
    '.email{display:none;padding:8px 10px 0;border-top:1px solid #e5e7eb;flex-direction:column;gap:4px}.email.on{display:flex}',
    '.email p{margin:0;font-size:12px;color:#4b5563}.email form{border:0;padding:0 0 8px}',
    '@media (max-width:480px){.panel{right:0;bottom:0;left:0;top:0;width:auto;height:auto;max-height:none;border-radius:0}}'
  ].join('');

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  function rid() {
    var a = new Uint8Array(12);
    (window.crypto || window.msCrypto).getRandomValues(a);
    return Array.prototype.map.call(a, function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
  }

  window.__spookatChat = function (o) {
    var KEY = 'spookat:' + o.site;
    var saved = {};
    try { saved = JSON.parse(localStorage.getItem(KEY) || '{}') || {}; } catch (e) { saved = {}; }
    function save() { try { localStorage.setItem(KEY, JSON.stringify(saved)); } catch (e) { /* private mode */ } }

    // --- DOM
    var style = el('style'); style.textContent = CSS; o.root.appendChild(style);
    var panel = el('div', 'panel'); panel.setAttribute('role', 'dialog'); panel.setAttribute('aria-label', 'Chat');
    var header = el('header'), title = el('div'), conn = el('span', 'conn');
    title.appendChild(el('b', '', 'Chat with us')); title.appendChild(conn);
    var closeBtn = el('button', '', '\u00d7'); closeBtn.type = 'button'; closeBtn.setAttribute('aria-label', 'Close chat');
    header.appendChild(title); header.appendChild(closeBtn);
    var banner = el('div', 'banner'); banner.setAttribute('role', 'status');
    var offlineNote = el('div', 'offline', 'Offline \u2014 your message will be sent when we\u2019re back.');
    offlineNote.setAttribute('role', 'status');
    var gone = el('p', 'gone', 'Chat is not available on this page.');
    var list = el('ol'); list.setAttribute('aria-live', 'polite');
    var empty = el('li', 'empty', 'Ask us anything: we usually answer within minutes.'); list.appendChild(empty);
    var emailBox = el('div', 'email'), emailForm = el('form'), emailInput = el('input'), emailBtn = el('button', '', 'Save');
    emailBox.appendChild(el('p', '', 'Leave your email and we can answer you there if you leave.'));
    emailInput.type = 'email'; emailInput.placeholder = 'you@example.com'; emailInput.setAttribute('aria-label', 'Your email');
    emailBtn.type = 'submit'; emailForm.appendChild(emailInput); emailForm.appendChild(emailBtn); emailBox.appendChild(emailForm);
    var form = el('form'), input = el('textarea'), sendBtn = el('button', '', 'Send');
    input.rows = 1; input.placeholder = 'Write a message\u2026'; input.setAttribute('aria-label', 'Message'); input.maxLength = 4000;
    sendBtn.type = 'submit'; form.appendChild(input); form.appendChild(sendBtn);
    panel.appendChild(header); panel.appendChild(gone); panel.appendChild(offlineNote); panel.appendChild(banner); panel.appendChild(list); panel.appendChild(emailBox); panel.appendChild(form);
    o.root.appendChild(panel);

    // --- state
    var ws = null, attempt = 0, retryTimer = 0, lastId = 0, convId = null;
    var seen = {};      // message_id -> true (shown once, whatever the path it came by)
    var pending = {};   // client_id -> {text, li, st, timer}
    var order = [];     // client ids in send order, for resending after a reconnect
    var blockedUntil = 0, countdown = 0;
    var dead = false;   // the server refused this page for good: no more connecting

    function scroll() { list.scrollTop = list.scrollHeight; }

    function addLi(li) {
      if (empty.parentNode) list.removeChild(empty);
      list.appendChild(li); scroll();
    }

    function render(m) {
      var mine = m.author === 'visitor';
      var li = el('li', mine ? 'me' : (m.author === 'system' ? 'them system' : 'them'));
      li.setAttribute('data-id', m.message_id);
      if (!mine && m.author === 'operator') li.appendChild(el('span', 'who', m.name || 'Support'));
      li.appendChild(el('div', 'bubble', m.text));
      addLi(li);
    }

    function setState(p, st, why) {
      p.st = st;
      p.li.classList.toggle('failed', st === 'failed');
      var s = p.li.querySelector('.state');
      s.textContent = st === 'sending' ? 'Sending\u2026' : st === 'sent' ? 'Sent' : st === 'pending' ? 'Pending'
        : 'Not sent' + (why ? ': ' + why : '');
      s.setAttribute('data-state', st);
      if (st === 'failed') {
        var b = el('button', '', 'Retry'); b.type = 'button';
        b.disabled = Date.now() < blockedUntil;
        b.onclick = function () { resend(p); };
        s.appendChild(b);
      }
    }

    function send(text) {
      var cid = rid();
      var li = el('li', 'me'); li.setAttribute('data-client-id', cid);
      li.appendChild(el('div', 'bubble', text)); li.appendChild(el('span', 'state'));
      addLi(li);
      var p = { cid: cid, text: text, li: li };
      pending[cid] = p; order.push(cid);
      transmit(p);
    }

    function transmit(p) {
      clearTimeout(p.timer);
      if (ws && ws.readyState === 1) {
        setState(p, 'sending');
        ws.send(JSON.stringify({ type: 'message', client_id: p.cid, text: p.text }));
        p.timer = setTimeout(function () { if (p.st === 'sending') setState(p, 'failed', 'no answer from the server'); }, 15000);
      } else setState(p, 'pending'); // sent when the socket says hello again
    }

    function resend(p) { if (Date.now() < blockedUntil) return; transmit(p); }

    function confirm(p, id) {
      clearTimeout(p.timer);
      seen[id] = true; p.li.setAttribute('data-id', id);
      setState(p, 'sent');
      delete pending[p.cid];
    }

    function block(ms, sentence) {
      blockedUntil = Date.now() + ms;
      clearInterval(countdown);
      var tick = function () {
        var left = Math.ceil((blockedUntil - Date.now()) / 1000);
        if (left <= 0) {
          clearInterval(countdown); banner.classList.remove('on');
          Array.prototype.forEach.call(list.querySelectorAll('.failed .state button'), function (b) { b.disabled = false; });
          return;
        }
        banner.textContent = sentence + ' You can send again in ' + left + ' s.';
        banner.classList.add('on');
      };
      tick(); countdown = setInterval(tick, 250);
    }

    function handle(f) {
      switch (f.type) {
        case 'hello':
          attempt = 0; conn.textContent = ''; offline(false);
          if (saved.token !== f.visitor) { saved.token = f.visitor; save(); }
          convId = f.conversation_id;
          if (convId) {
            showEmail();
            ws.send(JSON.stringify({ type: 'resume', after_message_id: lastId }));
          }
          order = order.filter(function (c) { return pending[c]; });
          order.forEach(function (c) { if (pending[c].st !== 'failed') transmit(pending[c]); });
          break;
        case 'ack':
          convId = f.conversation_id; showEmail();
          if (pending[f.client_id]) confirm(pending[f.client_id], f.message_id); else seen[f.message_id] = true;
          break;
        case 'message':
          if (f.message_id > lastId) lastId = f.message_id;
          if (seen[f.message_id]) return;
          if (f.client_id && pending[f.client_id]) { confirm(pending[f.client_id], f.message_id); return; }
          seen[f.message_id] = true;
          render(f);
          break;
        case 'email_saved':
          saved.email = f.email; save(); emailBox.classList.remove('on');
          break;
        case 'error':
          var p = f.client_id && pending[f.client_id];
          if (f.code === 'rate_limited' || f.code === 'braked') {
            block(f.retry_after_ms || 3000, f.code === 'braked'
              ? 'This chat is receiving too many messages right now.'
              : 'You are sending messages too fast.');
          }
          if (p && f.code === 'unavailable' && (p.tries = (p.tries || 0) + 1) <= 5) {
            // The server could not take it for a moment: send it again by itself, later each time.
            clearTimeout(p.timer);
            p.timer = setTimeout(function () { if (p.st === 'sending') transmit(p); }, Math.max(f.retry_after_ms || 1000, 500) * p.tries);
            break;
          }
          if (p) setState(p, 'failed', f.message);
          else if (f.code !== 'rate_limited' && f.code !== 'braked') { banner.textContent = f.message; banner.classList.add('on'); }
          break;
      }
    }

    function showEmail() { if (!saved.email) emailBox.classList.add('on'); }

    function connect() {
      clearTimeout(retryTimer);
      if (dead || ws && ws.readyState < 2) return;
      var u = o.base.replace(/^http/, 'ws') + '/v1/widget/ws?site=' + encodeURIComponent(o.site) +
        (saved.token ? '&visitor=' + encodeURIComponent(saved.token) : '');
      var s, up = false;
      try { s = new WebSocket(u); } catch (e) { return probe(); }
      ws = s;
      s.onopen = function () { up = true; };
      s.onmessage = function (e) { var f; try { f = JSON.parse(e.data); } catch (x) { return; } handle(f); };
      s.onclose = function () {
        if (ws !== s) return;
        ws = null;
        // What was in flight is sent again after the next hello (same client_id: no duplicate).
        order.forEach(function (c) { var p = pending[c]; if (p && p.st === 'sending') { clearTimeout(p.timer); setState(p, 'pending'); } });
        if (up) later(); else probe();
      };
    }

    // A refused handshake reaches a WebSocket only as close 1006, like a dead network: ask the
    // server's preflight, which answers what the handshake would have (schema/PROTOCOL.md).
    function probe() {
      fetch(o.base + '/v1/widget/check?site=' + encodeURIComponent(o.site), { method: 'POST', cache: 'no-store', credentials: 'omit' })
        .then(function (r) {
          if (r.status === 429) {
            conn.textContent = 'reconnecting\u2026';
            retryTimer = setTimeout(connect, (parseInt(r.headers.get('Retry-After'), 10) || 5) * 1000);
            return;
          }
          if (r.status === 403 || r.status === 404) {
            return r.json().then(function (e) {
              if (e.code === 'unknown_site' || e.code === 'origin_not_allowed') refused(e); else later(true);
            }, function () { later(true); });
          }
          later(!r.ok); // a 5xx here is a proxy in front of an edge that is down
        }, function () { later(true); });
    }

    function refused(e) {
      dead = true;
      clearTimeout(retryTimer);
      console.warn('spookat: the chat is not available on this page: ' + e.code + ': ' + e.message);
      conn.textContent = '';
      panel.classList.add('dead');
    }

    function offline(on) { offlineNote.classList.toggle('on', on); }

    function later(down) {
      if (down != null) offline(down);
      var ms = Math.min(15000, 500 * Math.pow(2, attempt++)) * (0.5 + Math.random() / 2);
      conn.textContent = offlineNote.classList.contains('on') ? 'offline' : 'reconnecting\u2026';
      retryTimer = setTimeout(connect, ms);
    }

    window.addEventListener('online', function () { attempt = 0; connect(); });

    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var t = input.value;
      if (!t.trim()) return;
      input.value = '';
      send(t);
    });
    input.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); form.requestSubmit ? form.requestSubmit() : sendBtn.click(); }
    });
    emailForm.addEventListener('submit', function (e) {
      e.preventDefault();
      var v = emailInput.value.trim();
      if (!v || !ws || ws.readyState !== 1) return;
      ws.send(JSON.stringify({ type: 'email', email: v }));
    });

    function toggle(open) {
      var on = open == null ? !panel.classList.contains('open') : open;
      panel.classList.toggle('open', on);
      o.button.setAttribute('aria-expanded', on ? 'true' : 'false');
      if (on) { connect(); scroll(); input.focus(); }
    }
    closeBtn.addEventListener('click', function () { toggle(false); o.button.focus(); });
    panel.addEventListener('keydown', function (e) { if (e.key === 'Escape') { toggle(false); o.button.focus(); } });

    connect(); // on intent: the history is there by the time the window opens
    return { toggle: toggle, _ws: function () { return ws; } };
  };
})();
