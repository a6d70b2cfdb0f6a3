  // What the chat window and the inbox both draw (assets.go puts this file where
  // /*@when.js*/ stands in chat.js and in app.js): the attach button's paperclip (below), and
  // times: a heading over each day's messages ("Today", "Yesterday", "Fri 4 Dec"), and each
  // message's time: "just now", "5 min ago", then the hour. word(key, vars) gives the page's
  // words for today, yesterday, justNow and minAgo ({n}).
  function whenDay(d, lang, word) {
    var today = new Date(), y = new Date(); y.setDate(today.getDate() - 1);
    if (d.toDateString() === today.toDateString()) return word('today');
    if (d.toDateString() === y.toDateString()) return word('yesterday');
    return d.toLocaleDateString(lang, { weekday: 'short', day: 'numeric', month: 'short', year: d.getFullYear() === today.getFullYear() ? undefined : 'numeric' });
  }
  function whenAgo(ms, lang, word) {
    var s = (Date.now() - ms) / 1000;
    if (s < 60) return word('justNow');
    if (s < 3600) return word('minAgo', { n: Math.floor(s / 60) });
    return new Date(ms).toLocaleTimeString(lang, { hour: '2-digit', minute: '2-digit' });
  }

  // clip is the attach button's paperclip, drawn (an emoji depends on the visitor's fonts).
  function clip() {
    var n = 'http://www.w3.org/2000/svg', v = document.createElementNS(n, 'svg'), p = document.createElementNS(n, 'path');
    v.setAttribute('viewBox', '0 0 24 24'); v.setAttribute('width', '22'); v.setAttribute('height', '22'); v.setAttribute('aria-hidden', 'true');
    p.setAttribute('d', 'M21.4 11.1l-9.2 9.2a6 6 0 0 1-8.5-8.5l9.2-9.2a4 4 0 0 1 5.7 5.7l-9.2 9.2a2 2 0 0 1-2.8-2.8l8.5-8.5');
    p.setAttribute('fill', 'none'); p.setAttribute('stroke', 'currentColor'); p.setAttribute('stroke-width', '2'); p.setAttribute('stroke-linecap', 'round');
    v.appendChild(p); return v;
  }
