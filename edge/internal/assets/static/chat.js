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
    'header{display:flex;align-items:center;justify-content:space-between;padding:12px 14px;background:var(--a,#4f46e5);color:#fff}',
    'header b{font-size:15px}header button{background:none;border:0;color:#fff;font-size:24px;line-height:1;cursor:pointer;width:44px;height:44px;margin:-8px -10px -8px 0;border-radius:8px}',
    '.conn{font-size:12px;opacity:.85;margin-left:8px}',
    '.banner,.offline{display:none;padding:8px 12px;background:#fef3c7;color:#78350f;font-size:13px}.banner.on,.offline.on{display:block}',
    '.gone{display:none;margin:auto;padding:24px;text-align:center;color:#4b5563}.dead>.gone{display:block}',
    '.dead>ol,.dead>form,.dead>.email,.dead>.banner,.dead>.offline{display:none!important}',
    'ol{list-style:none;margin:0;padding:12px;flex:1;overflow-y:auto;display:flex;flex-direction:column;gap:8px}',
    'li{max-width:80%;display:flex;flex-direction:column}',
    'li.me{align-self:flex-end;align-items:flex-end}li.them{align-self:flex-start}',
    '.bubble{padding:8px 11px;border-radius:12px;white-space:pre-wrap;word-wrap:break-word;overflow-wrap:anywhere}',
    'li.me .bubble{background:var(--a,#4f46e5);color:#fff}li.them .bubble{background:#f3f4f6}',
    'li.system .bubble{background:none;color:#6b7280;font-style:italic}',
    '.who{font-size:12px;color:#6b7280;margin:0 4px 2px}',
    '.state{font-size:11px;color:#6b7280;margin:2px 4px 0}.failed .state{color:#b91c1c}',
    '.state button{margin-left:6px;font-size:13px;border:1px solid #b91c1c;color:#b91c1c;background:#fff;border-radius:6px;cursor:pointer;padding:0 12px;min-height:32px}',
    '.state button:disabled{opacity:.5;cursor:default}',
    '.empty{color:#6b7280;text-align:center;margin:auto 0}',
    'form{display:flex;gap:8px;padding:10px;border-top:1px solid #e5e7eb}',
    'textarea::placeholder{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}',
    'textarea,input{flex:1;resize:none;border:1px solid #d1d5db;border-radius:8px;padding:10px;font:inherit;font-size:16px;min-width:0;min-height:44px;box-sizing:border-box;max-height:120px}',
    'form button{border:0;border-radius:8px;background:var(--a,#4f46e5);color:#fff;padding:0 16px;cursor:pointer;font:inherit;min-height:44px;align-self:flex-end}',
    'button:focus-visible,textarea:focus-visible,input:focus-visible{outline:3px solid #a5b4fc;outline-offset:1px}',
    '.email{display:none;padding:8px 10px 0;border-top:1px solid #e5e7eb;flex-direction:column;gap:4px}.email.on{display:flex}.email.on+form{border-top:0}',
    '.emailok{display:none;padding:6px 12px 0;font-size:12px;color:#166534}.emailok.on{display:block}',
    '.sub{display:block;font-size:12px;opacity:.9;font-weight:400;margin-top:2px}.sub:before{content:"";display:inline-block;width:8px;height:8px;border-radius:50%;margin-inline-end:6px;background:#9ca3af}',
    '.sub.online:before{background:#22c55e}',
    '.panel.left,.preview.left{left:20px;right:auto}.badge.left{left:62px;right:auto}',
    'li.greet .bubble{background:#f3f4f6}',
    'li.rate{max-width:90%}li.rate p{margin:0 0 8px}.rrow{display:flex;gap:8px;margin-bottom:8px}',
    '.rbtn,.rsend{min-height:44px;border-radius:8px;border:1px solid #d1d5db;background:#fff;cursor:pointer;font:inherit;padding:0 14px}',
    '.rbtn[aria-pressed=true]{border-color:var(--a,#4f46e5);box-shadow:inset 0 0 0 1px var(--a,#4f46e5)}',
    '.tx{display:block;width:100%;margin-top:8px}.txok{margin:8px 0 0;font-size:12px;color:#166534}.txfail{margin:8px 0 0;font-size:12px;color:#b91c1c}',
    'li.rate textarea{width:100%;margin-bottom:8px}.rsend{background:var(--a,#4f46e5);color:#fff;border:0}.rsend:disabled{opacity:.5;cursor:default}',
    '.email p{margin:0;font-size:12px;color:#4b5563}.email form{border:0;padding:0 0 8px}',
    'li.day{align-self:center;max-width:none;font-size:11px;color:#6b7280;margin:4px 0}',
    'time{font-size:11px;color:#6b7280;margin:2px 4px 0}',
    '.state.old{display:none}',
    '.bubble img{display:block;max-width:100%;max-height:240px;border-radius:8px}.bubble a{color:inherit}',
    'li .bubble.pic{padding:0;background:none}.pic img{border:1px solid #e5e7eb}.chip svg{width:16px;height:16px;vertical-align:-3px}',
    '.bubble img+span,.bubble a+span{display:block;margin-top:8px}',
    'form .att{background:none;color:#4b5563;padding:0;width:44px;display:flex;align-items:center;justify-content:center}.att:hover{background:#f3f4f6}',
    '.typing{display:none;padding:0 14px 6px;font-size:12px;color:#6b7280;font-style:italic}.typing.on{display:block}',
    '.badge{position:fixed;right:14px;bottom:62px;min-width:20px;height:20px;padding:0 6px;box-sizing:border-box;border-radius:10px;background:#dc2626;color:#fff;',
    'font:600 12px/20px system-ui,sans-serif;text-align:center;z-index:2147483002;display:none;pointer-events:none}.badge.on{display:block}',
    '.preview{position:fixed;right:20px;bottom:88px;max-width:260px;display:none;background:#fff;color:#111827;border-radius:12px;',
    'box-shadow:0 6px 24px rgba(0,0,0,.22);padding:10px 34px 10px 12px;font:14px/1.35 system-ui,sans-serif;z-index:2147483001;cursor:pointer}.preview.on{display:block}',
    '.preview b{display:block;font-size:12px;color:#6b7280;margin-bottom:2px}.preview p{margin:0;display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden}',
    '.preview button{position:absolute;top:0;right:0;width:44px;height:44px;border:0;background:none;color:#6b7280;font-size:18px;cursor:pointer}',
    '.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}',
    '@media (max-width:480px){.panel{right:0;bottom:0;left:0;top:0;width:auto;height:auto;max-height:none;border-radius:0}',
    '.panel>form{padding-bottom:max(10px,env(safe-area-inset-bottom))}header{padding-top:max(12px,env(safe-area-inset-top))}}'
  ].join('');


  // Every string the window shows, by language; a site's settings may override any of them
  // (widget.strings). {name}-style fields are filled in.
  var STRINGS = {
    en: { title: 'Chat with us', close: 'Close chat', offline: 'Offline \u2014 your message will be sent when we\u2019re back.',
      gone: 'Chat is not available on this page.', empty: 'Ask us anything.', save: 'Save',
      emailAsk: 'Get the reply by email too: we may answer after you leave.', emailLabel: 'Your email', send: 'Send',
      placeholder: 'Write a message\u2026', message: 'Message', dismiss: 'Dismiss', today: 'Today', yesterday: 'Yesterday',
      support: 'Support', sent: 'Sent', seen: 'Seen', sending: 'Sending\u2026', pending: 'Pending', notSent: 'Not sent', retry: 'Retry',
      emailThanks: 'Thanks! We\u2019ll email you at {email} if you leave.', emailEarly: 'We\u2019ll keep {email} with your first message.',
      braked: 'This chat is receiving too many messages right now.', tooFast: 'You are sending messages too fast.',
      sendAgain: 'You can send again in {n} s.', away: 'Away', online: 'Online',
      awayMessage: 'We\u2019re away right now. Leave a message and your email: we\u2019ll answer by email.',
      replyTime: 'We usually answer within minutes.', typing: '{name} is typing\u2026', justNow: 'just now', minAgo: '{n} min ago',
      open: 'Open chat', unread: '{label}, {n} unread', noAnswer: 'no answer from the server', reconnecting: 'reconnecting\u2026',
      offlineShort: 'offline', tooLarge: 'the message is longer than 4,000 characters',
      closedAsk: 'This conversation is closed. How was it?', good: 'Good', bad: 'Bad', comment: 'Tell us more (optional)', rate: 'Send rating', rated: 'Thanks for your feedback!', backAt: 'Away \u00b7 back {when}', attach: 'Attach a file', uploading: 'Uploading\u2026', fileTooLarge: 'the file is larger than {max} MB', transcript: 'Email me this conversation', transcriptSent: 'Sent to {email}.', transcriptQueued: 'On its way to {email}.', transcriptFailed: 'We could not send it to {email}.', planLimit: 'This chat is not taking new conversations right now. Please try again later, or reach the site another way.' },
    de: { title: 'Schreiben Sie uns', close: 'Chat schlie\u00dfen', offline: 'Offline \u2014 Ihre Nachricht wird gesendet, sobald wir wieder da sind.',
      gone: 'Der Chat ist auf dieser Seite nicht verf\u00fcgbar.', empty: 'Fragen Sie uns, was Sie m\u00f6chten.', save: 'Speichern',
      emailAsk: 'Antwort auch per E-Mail: Vielleicht antworten wir, wenn Sie schon weg sind.', emailLabel: 'Ihre E-Mail-Adresse', send: 'Senden',
      placeholder: 'Nachricht schreiben\u2026', message: 'Nachricht', dismiss: 'Ausblenden', today: 'Heute', yesterday: 'Gestern',
      support: 'Support', sent: 'Gesendet', seen: 'Gelesen', sending: 'Wird gesendet\u2026', pending: 'Wartet', notSent: 'Nicht gesendet', retry: 'Erneut senden',
      emailThanks: 'Danke! Wir schreiben Ihnen an {email}, falls Sie gehen.', emailEarly: 'Wir speichern {email} mit Ihrer ersten Nachricht.',
      braked: 'Dieser Chat erh\u00e4lt gerade zu viele Nachrichten.', tooFast: 'Sie senden Nachrichten zu schnell.',
      sendAgain: 'Sie k\u00f6nnen in {n} s wieder senden.', away: 'Abwesend', online: 'Online',
      awayMessage: 'Wir sind gerade nicht da. Hinterlassen Sie eine Nachricht und Ihre E-Mail-Adresse: Wir antworten per E-Mail.',
      replyTime: 'Wir antworten meist innerhalb weniger Minuten.', typing: '{name} schreibt\u2026', justNow: 'gerade eben', minAgo: 'vor {n} Min.',
      open: 'Chat \u00f6ffnen', unread: '{label}, {n} ungelesen', noAnswer: 'keine Antwort vom Server', reconnecting: 'verbinde neu\u2026',
      offlineShort: 'offline', tooLarge: 'die Nachricht ist l\u00e4nger als 4.000 Zeichen',
      closedAsk: 'Dieses Gespr\u00e4ch ist beendet. Wie war es?', good: 'Gut', bad: 'Schlecht', comment: 'Erz\u00e4hlen Sie mehr (optional)', rate: 'Bewertung senden', rated: 'Danke f\u00fcr Ihr Feedback!', backAt: 'Abwesend \u00b7 zur\u00fcck {when}', attach: 'Datei anh\u00e4ngen', uploading: 'Wird hochgeladen\u2026', fileTooLarge: 'die Datei ist gr\u00f6\u00dfer als {max} MB', transcript: 'Dieses Gespr\u00e4ch per E-Mail senden', transcriptSent: 'An {email} gesendet.', transcriptQueued: 'Unterwegs an {email}.', transcriptFailed: 'Wir konnten es nicht an {email} senden.', planLimit: 'Dieser Chat nimmt gerade keine neuen Gespr\u00e4che an. Bitte versuchen Sie es sp\u00e4ter noch einmal oder erreichen Sie die Website auf anderem Weg.' },
    fr: { title: '\u00c9crivez-nous', close: 'Fermer le chat', offline: 'Hors ligne \u2014 votre message partira d\u00e8s notre retour.',
      gone: 'Le chat n\u2019est pas disponible sur cette page.', empty: 'Posez-nous vos questions.', save: 'Enregistrer',
      emailAsk: 'Recevez aussi la r\u00e9ponse par e-mail : nous r\u00e9pondrons peut-\u00eatre apr\u00e8s votre d\u00e9part.', emailLabel: 'Votre e-mail', send: 'Envoyer',
      placeholder: '\u00c9crivez un message\u2026', message: 'Message', dismiss: 'Masquer', today: 'Aujourd\u2019hui', yesterday: 'Hier',
      support: 'Support', sent: 'Envoy\u00e9', seen: 'Lu', sending: 'Envoi\u2026', pending: 'En attente', notSent: 'Non envoy\u00e9', retry: 'R\u00e9essayer',
      emailThanks: 'Merci ! Nous vous \u00e9crirons \u00e0 {email} si vous partez.', emailEarly: 'Nous garderons {email} avec votre premier message.',
      braked: 'Ce chat re\u00e7oit trop de messages en ce moment.', tooFast: 'Vous envoyez des messages trop vite.',
      sendAgain: 'Vous pourrez renvoyer dans {n} s.', away: 'Absent', online: 'En ligne',
      awayMessage: 'Nous sommes absents pour le moment. Laissez un message et votre e-mail : nous r\u00e9pondrons par e-mail.',
      replyTime: 'Nous r\u00e9pondons g\u00e9n\u00e9ralement en quelques minutes.', typing: '{name} \u00e9crit\u2026', justNow: '\u00e0 l\u2019instant', minAgo: 'il y a {n} min',
      open: 'Ouvrir le chat', unread: '{label}, {n} non lu(s)', noAnswer: 'pas de r\u00e9ponse du serveur', reconnecting: 'reconnexion\u2026',
      offlineShort: 'hors ligne', tooLarge: 'le message d\u00e9passe 4 000 caract\u00e8res',
      closedAsk: 'Cette conversation est termin\u00e9e. Comment s\u2019est-elle pass\u00e9e ?', good: 'Bien', bad: 'Mal', comment: 'Dites-nous en plus (facultatif)', rate: 'Envoyer la note', rated: 'Merci pour votre avis !', backAt: 'Absent \u00b7 de retour {when}', attach: 'Joindre un fichier', uploading: 'Envoi du fichier\u2026', fileTooLarge: 'le fichier d\u00e9passe {max} Mo', transcript: 'M\u2019envoyer cette conversation par e-mail', transcriptSent: 'Envoy\u00e9e \u00e0 {email}.', transcriptQueued: 'En route vers {email}.', transcriptFailed: 'Impossible de l\u2019envoyer \u00e0 {email}.', planLimit: 'Ce chat n\u2019accepte pas de nouvelles conversations pour le moment. R\u00e9essayez plus tard, ou contactez le site autrement.' },
    es: { title: 'Escr\u00edbenos', close: 'Cerrar el chat', offline: 'Sin conexi\u00f3n \u2014 tu mensaje se enviar\u00e1 cuando volvamos.',
      gone: 'El chat no est\u00e1 disponible en esta p\u00e1gina.', empty: 'Preg\u00fantanos lo que quieras.', save: 'Guardar',
      emailAsk: 'Recibe tambi\u00e9n la respuesta por correo: quiz\u00e1 respondamos cuando ya te hayas ido.', emailLabel: 'Tu correo', send: 'Enviar',
      placeholder: 'Escribe un mensaje\u2026', message: 'Mensaje', dismiss: 'Ocultar', today: 'Hoy', yesterday: 'Ayer',
      support: 'Soporte', sent: 'Enviado', seen: 'Visto', sending: 'Enviando\u2026', pending: 'Pendiente', notSent: 'No enviado', retry: 'Reintentar',
      emailThanks: '\u00a1Gracias! Te escribiremos a {email} si te vas.', emailEarly: 'Guardaremos {email} con tu primer mensaje.',
      braked: 'Este chat est\u00e1 recibiendo demasiados mensajes ahora mismo.', tooFast: 'Est\u00e1s enviando mensajes demasiado r\u00e1pido.',
      sendAgain: 'Podr\u00e1s enviar de nuevo en {n} s.', away: 'Ausente', online: 'En l\u00ednea',
      awayMessage: 'Ahora no estamos. Deja un mensaje y tu correo: te responderemos por correo.',
      replyTime: 'Solemos responder en pocos minutos.', typing: '{name} est\u00e1 escribiendo\u2026', justNow: 'ahora mismo', minAgo: 'hace {n} min',
      open: 'Abrir el chat', unread: '{label}, {n} sin leer', noAnswer: 'sin respuesta del servidor', reconnecting: 'reconectando\u2026',
      offlineShort: 'sin conexi\u00f3n', tooLarge: 'el mensaje supera los 4000 caracteres',
      closedAsk: 'Esta conversaci\u00f3n est\u00e1 cerrada. \u00bfQu\u00e9 tal fue?', good: 'Bien', bad: 'Mal', comment: 'Cu\u00e9ntanos m\u00e1s (opcional)', rate: 'Enviar valoraci\u00f3n', rated: '\u00a1Gracias por tu opini\u00f3n!', backAt: 'Ausente \u00b7 volvemos {when}', attach: 'Adjuntar un archivo', uploading: 'Subiendo\u2026', fileTooLarge: 'el archivo supera los {max} MB', transcript: 'Enviarme esta conversaci\u00f3n por correo', transcriptSent: 'Enviada a {email}.', transcriptQueued: 'En camino a {email}.', transcriptFailed: 'No pudimos enviarla a {email}.', planLimit: 'Este chat no acepta conversaciones nuevas ahora mismo. Int\u00e9ntalo m\u00e1s tarde o contacta con el sitio de otra forma.' },
    pt: { title: 'Fale conosco', close: 'Fechar o chat', offline: 'Sem conex\u00e3o \u2014 sua mensagem ser\u00e1 enviada quando voltarmos.',
      gone: 'O chat n\u00e3o est\u00e1 dispon\u00edvel nesta p\u00e1gina.', empty: 'Pergunte o que quiser.', save: 'Salvar',
      emailAsk: 'Receba a resposta tamb\u00e9m por e-mail: podemos responder depois que voc\u00ea sair.', emailLabel: 'Seu e-mail', send: 'Enviar',
      placeholder: 'Escreva uma mensagem\u2026', message: 'Mensagem', dismiss: 'Ocultar', today: 'Hoje', yesterday: 'Ontem',
      support: 'Suporte', sent: 'Enviada', seen: 'Vista', sending: 'Enviando\u2026', pending: 'Pendente', notSent: 'N\u00e3o enviada', retry: 'Tentar de novo',
      emailThanks: 'Obrigado! Vamos escrever para {email} se voc\u00ea sair.', emailEarly: 'Vamos guardar {email} com sua primeira mensagem.',
      braked: 'Este chat est\u00e1 recebendo mensagens demais agora.', tooFast: 'Voc\u00ea est\u00e1 enviando mensagens r\u00e1pido demais.',
      sendAgain: 'Voc\u00ea poder\u00e1 enviar de novo em {n} s.', away: 'Ausente', online: 'On-line',
      awayMessage: 'Estamos ausentes agora. Deixe uma mensagem e seu e-mail: responderemos por e-mail.',
      replyTime: 'Costumamos responder em poucos minutos.', typing: '{name} est\u00e1 digitando\u2026', justNow: 'agora mesmo', minAgo: 'h\u00e1 {n} min',
      open: 'Abrir o chat', unread: '{label}, {n} n\u00e3o lida(s)', noAnswer: 'sem resposta do servidor', reconnecting: 'reconectando\u2026',
      offlineShort: 'sem conex\u00e3o', tooLarge: 'a mensagem tem mais de 4.000 caracteres',
      closedAsk: 'Esta conversa foi encerrada. Como foi?', good: 'Boa', bad: 'Ruim', comment: 'Conte mais (opcional)', rate: 'Enviar avalia\u00e7\u00e3o', rated: 'Obrigado pelo seu retorno!', backAt: 'Ausente \u00b7 voltamos {when}', attach: 'Anexar um arquivo', uploading: 'Enviando arquivo\u2026', fileTooLarge: 'o arquivo tem mais de {max} MB', transcript: 'Enviar esta conversa por e-mail', transcriptSent: 'Enviada para {email}.', transcriptQueued: 'A caminho de {email}.', transcriptFailed: 'N\u00e3o conseguimos enviar para {email}.', planLimit: 'Este chat n\u00e3o est\u00e1 aceitando novas conversas agora. Tente mais tarde ou fale com o site de outra forma.' },
    ar: { title: 'تحدّث معنا', close: 'إغلاق المحادثة', offline: 'غير متصل — ستُرسَل رسالتك عند عودتنا.',
      gone: 'المحادثة غير متاحة في هذه الصفحة.', empty: 'اسألنا عن أي شيء.', save: 'حفظ',
      emailAsk: 'احصل على الرد عبر البريد الإلكتروني أيضًا: قد نجيب بعد مغادرتك.', emailLabel: 'بريدك الإلكتروني', send: 'إرسال',
      placeholder: 'اكتب رسالة…', message: 'رسالة', dismiss: 'إخفاء', today: 'اليوم', yesterday: 'أمس',
      support: 'الدعم', sent: 'أُرسلت', seen: 'شوهدت', sending: 'جارٍ الإرسال…', pending: 'قيد الانتظار', notSent: 'لم تُرسَل', retry: 'أعد المحاولة',
      emailThanks: 'شكرًا! سنراسلك على {email} إذا غادرت.', emailEarly: 'سنحفظ {email} مع رسالتك الأولى.',
      braked: 'تتلقى هذه المحادثة رسائل كثيرة جدًا الآن.', tooFast: 'أنت ترسل الرسائل بسرعة كبيرة.',
      sendAgain: 'يمكنك الإرسال مجددًا بعد {n} ث.', away: 'غير متواجدين', online: 'متصلون',
      awayMessage: 'نحن غير متواجدين الآن. اترك رسالة وبريدك الإلكتروني وسنرد عليك عبر البريد.',
      replyTime: 'نرد عادةً خلال دقائق.', typing: '{name} يكتب…', justNow: 'الآن', minAgo: 'قبل {n} د',
      open: 'فتح المحادثة', unread: '{label}، {n} غير مقروءة', noAnswer: 'لا رد من الخادم', reconnecting: 'جارٍ إعادة الاتصال…',
      offlineShort: 'غير متصل', tooLarge: 'الرسالة أطول من 4000 حرف',
      closedAsk: 'أُغلقت هذه المحادثة. كيف كانت؟', good: 'جيدة', bad: 'سيئة', comment: 'أخبرنا بالمزيد (اختياري)', rate: 'إرسال التقييم', rated: 'شكرًا على ملاحظاتك!', backAt: 'غير متواجدين · نعود {when}', attach: 'إرفاق ملف', uploading: 'جارٍ الرفع…', fileTooLarge: 'الملف أكبر من {max} ميغابايت', transcript: 'أرسل لي هذه المحادثة بالبريد', transcriptSent: 'أُرسلت إلى {email}.', transcriptQueued: 'في الطريق إلى {email}.', transcriptFailed: 'تعذّر إرسالها إلى {email}.', planLimit: 'هذه الدردشة لا تقبل محادثات جديدة الآن. حاول لاحقًا أو تواصل مع الموقع بطريقة أخرى.' },
    he: { title: 'דברו איתנו', close: 'סגירת הצ׳אט', offline: 'אין חיבור — ההודעה תישלח כשנחזור.',
      gone: 'הצ׳אט אינו זמין בדף זה.', empty: 'שאלו אותנו כל דבר.', save: 'שמירה',
      emailAsk: 'קבלו את התשובה גם בדוא״ל: ייתכן שנענה אחרי שתצאו.', emailLabel: 'כתובת הדוא״ל שלך', send: 'שליחה',
      placeholder: 'כתבו הודעה…', message: 'הודעה', dismiss: 'הסתרה', today: 'היום', yesterday: 'אתמול',
      support: 'תמיכה', sent: 'נשלחה', seen: 'נקראה', sending: 'שולח…', pending: 'ממתינה', notSent: 'לא נשלחה', retry: 'ניסיון נוסף',
      emailThanks: 'תודה! נכתוב אליך לכתובת {email} אם תצאו.', emailEarly: 'נשמור את {email} עם ההודעה הראשונה.',
      braked: 'הצ׳אט מקבל כרגע יותר מדי הודעות.', tooFast: 'ההודעות נשלחות מהר מדי.',
      sendAgain: 'אפשר לשלוח שוב בעוד {n} שנ׳.', away: 'לא זמינים', online: 'מחוברים',
      awayMessage: 'אנחנו לא זמינים כרגע. השאירו הודעה וכתובת דוא״ל ונענה בדוא״ל.',
      replyTime: 'בדרך כלל אנחנו עונים תוך דקות.', typing: '{name} מקליד/ה…', justNow: 'הרגע', minAgo: 'לפני {n} דק׳',
      open: 'פתיחת הצ׳אט', unread: '{label}, {n} שלא נקראו', noAnswer: 'אין תשובה מהשרת', reconnecting: 'מתחבר מחדש…',
      offlineShort: 'לא מחובר', tooLarge: 'ההודעה ארוכה מ־4,000 תווים',
      closedAsk: 'השיחה הזאת נסגרה. איך היה?', good: 'טוב', bad: 'לא טוב', comment: 'ספרו לנו עוד (לא חובה)', rate: 'שליחת הדירוג', rated: 'תודה על המשוב!', backAt: 'לא זמינים · נחזור {when}', attach: 'צירוף קובץ', uploading: 'מעלה…', fileTooLarge: 'הקובץ גדול מ־{max} MB', transcript: 'שלחו לי את השיחה בדוא״ל', transcriptSent: 'נשלחה אל {email}.', transcriptQueued: 'בדרך אל {email}.', transcriptFailed: 'לא הצלחנו לשלוח אל {email}.', planLimit: 'הצ׳אט הזה לא מקבל שיחות חדשות כרגע. נסו שוב מאוחר יותר, או פנו לאתר בדרך אחרת.' }
  };
  var RTL = { ar: 1, he: 1, fa: 1, ur: 1 };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

/*@when.js*/
  function rid() {
    var a = new Uint8Array(12);
    (window.crypto || window.msCrypto).getRandomValues(a);
    return Array.prototype.map.call(a, function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
  }

  window.__spookatChat = function (o) {
    var KEY = 'spookat:' + o.site;
    // The language: the embed's data-lang, else the site's, else the browser's; English for one
    // the table does not have (a right-to-left one still lays the window out right to left).
    var asked = '', lang = 'en', site = {};
    function pickLang() {
      asked = String(o.lang || site.language || navigator.language || 'en').toLowerCase().split('-')[0];
      lang = STRINGS[asked] ? asked : 'en';
    }
    pickLang();
    function t(k, v) {
      var x = (site.strings && site.strings[k]) || STRINGS[lang][k] || STRINGS.en[k] || k;
      return x.replace(/\{(\w+)\}/g, function (m, n) { return v && v[n] != null ? v[n] : m; });
    }
    var saved = {};
    try { saved = JSON.parse(localStorage.getItem(KEY) || '{}') || {}; } catch (e) { saved = {}; }
    // Tokens this tab shut down: another tab that has not yet heard of the shutdown may write one
    // back with its read mark; it is never adopted or saved again.
    var forgotten = {};
    function save() {
      if (forgotten[saved.token]) return;
      try { localStorage.setItem(KEY, JSON.stringify(saved)); } catch (e) { /* private mode */ }
    }

    // --- DOM
    var style = el('style'); style.textContent = CSS; o.root.appendChild(style);
    var panel = el('div', 'panel'); panel.setAttribute('role', 'dialog'); panel.setAttribute('aria-modal', 'true');
    panel.id = 'spookat-panel'; o.button.setAttribute('aria-controls', panel.id);
    var header = el('header'), title = el('div'), conn = el('span', 'conn'), heading = el('b'), sub = el('span', 'sub');
    title.appendChild(heading); title.appendChild(conn); title.appendChild(sub);
    heading.id = 'spookat-title'; panel.setAttribute('aria-labelledby', heading.id);
    var closeBtn = el('button', '', '\u00d7'); closeBtn.type = 'button';
    header.appendChild(title); header.appendChild(closeBtn);
    var banner = el('div', 'banner'); banner.setAttribute('role', 'status');
    var offlineNote = el('div', 'offline');
    offlineNote.setAttribute('role', 'status');
    var gone = el('p', 'gone');
    var list = el('ol');
    var announcer = el('div', 'sr'); announcer.setAttribute('aria-live', 'polite'); // new incoming messages only
    var typingNote = el('div', 'typing');
    var empty = el('li', 'empty'); list.appendChild(empty);
    var emailBox = el('div', 'email'), emailForm = el('form'), emailInput = el('input'), emailBtn = el('button'), emailAsk = el('p');
    var emailOk = el('p', 'emailok'); emailOk.setAttribute('role', 'status');
    emailBox.appendChild(emailAsk);
    emailInput.type = 'email'; emailInput.placeholder = 'you@example.com';
    emailBtn.type = 'submit'; emailForm.appendChild(emailInput); emailForm.appendChild(emailBtn); emailBox.appendChild(emailForm);
    var form = el('form'), input = el('textarea'), sendBtn = el('button'), attachBtn = el('button', 'att'), picker = el('input');
    attachBtn.appendChild(clip());
    input.rows = 1; input.maxLength = 4000; input.dir = 'auto'; emailInput.dir = 'auto';
    attachBtn.type = 'button'; picker.type = 'file'; picker.hidden = true; picker.tabIndex = -1;
    sendBtn.type = 'submit'; form.appendChild(attachBtn); form.appendChild(picker); form.appendChild(input); form.appendChild(sendBtn);
    panel.appendChild(header); panel.appendChild(gone); panel.appendChild(offlineNote); panel.appendChild(banner); panel.appendChild(list); panel.appendChild(typingNote); panel.appendChild(emailOk); panel.appendChild(emailBox); panel.appendChild(form);
    panel.appendChild(announcer);
    o.root.appendChild(panel);
    // Shown while the window is closed: the unread count on the launcher and the last unread reply.
    var badge = el('span', 'badge'); badge.setAttribute('aria-hidden', 'true');
    var preview = el('div', 'preview'), previewWho = el('b'), previewText = el('p'), previewClose = el('button', '', '\u00d7');
    previewClose.type = 'button'; previewText.dir = 'auto';
    preview.appendChild(previewWho); preview.appendChild(previewText); preview.appendChild(previewClose);
    o.root.appendChild(badge); o.root.appendChild(preview);
    [panel, preview, badge].forEach(function (e) { e.classList.toggle('left', !!o.left); }); // by the launcher
    function relabel() {
      panel.setAttribute('lang', lang); panel.dir = RTL[asked] ? 'rtl' : 'ltr';
      heading.textContent = site.title || t('title'); closeBtn.setAttribute('aria-label', t('close'));
      offlineNote.textContent = t('offline'); gone.textContent = t('gone'); emailBtn.textContent = t('save');
      emailAsk.textContent = t('emailAsk'); emailInput.setAttribute('aria-label', t('emailLabel'));
      sendBtn.textContent = t('send'); input.placeholder = t('placeholder'); input.setAttribute('aria-label', t('message'));
      attachBtn.setAttribute('aria-label', t('attach')); attachBtn.title = t('attach');
      previewClose.setAttribute('aria-label', t('dismiss'));
    }
    relabel();

    // --- state
    var ws = null, attempt = 0, retryTimer = 0, lastId = 0, convId = null;
    var seen = {};      // message_id -> true (shown once, whatever the path it came by)
    var pending = {};   // client_id -> {text, li, st, timer}
    var order = [];     // client ids in send order, for resending after a reconnect
    var blockedUntil = 0, countdown = 0;
    var dead = false;   // the server refused this page for good: no more connecting
    var readId = saved.read || 0;  // the visitor's read marker (synced across tabs by localStorage)
    var sentRead = 0;              // the last marker sent to the server
    var seenId = 0;                // the operators' read marker: "Seen" under the visitor's messages up to it
    var rateCard = null, convStatus = '', rating = '', heldHello = null, opensAt = '';
    var lastHello = 0, away = true, lastUnread = 0, identity = null, hasEmail = false;
    function emit(e, v) { if (o.emit) o.emit(e, v); }
    var typingTimer = 0, typedAt = 0, lastDay = '', dismissed = 0;
    var baseTitle = null, ourTitle = null;

    function scroll() { list.scrollTop = list.scrollHeight; }

    // when is a coming time as a visitor reads it: the hour today, else the weekday and hour.
    function when(ms) {
      var d = new Date(ms), hm = { hour: '2-digit', minute: '2-digit' };
      return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString(lang, hm)
        : d.toLocaleString(lang, { weekday: 'short', hour: '2-digit', minute: '2-digit' });
    }
    function stamp(li, at) {
      var ms = at ? Date.parse(at) : Date.now(), d = new Date(ms);
      var k = d.toDateString();
      if (k !== lastDay) { lastDay = k; list.appendChild(el('li', 'day', whenDay(d, lang, t))); }
      var tm = el('time', '', whenAgo(ms, lang, t)); tm.dateTime = d.toISOString(); tm.title = d.toLocaleString(lang);
      li.appendChild(tm);
    }
    setInterval(function () {
      Array.prototype.forEach.call(list.querySelectorAll('time'), function (e) { e.textContent = whenAgo(Date.parse(e.dateTime), lang, t); });
    }, 30000);

    function addLi(li, at) {
      if (empty.parentNode && empty.className === 'empty') list.removeChild(empty); // a greeting stays, on top
      stamp(li, at);
      if (rateCard && rateCard.parentNode) list.insertBefore(li, rateCard); else list.appendChild(li);
      scroll();
    }

    function render(m, live) {
      var mine = m.author === 'visitor';
      var li = el('li', mine ? 'me' : (m.author === 'system' ? 'them system' : 'them'));
      li.setAttribute('data-id', m.message_id);
      if (!mine && m.author === 'operator') li.appendChild(el('span', 'who', m.name || t('support')));
      li.appendChild(bubble(m.text, m.file, m.file && m.file.url && o.base + m.file.url));
      if (mine) { var st = el('span', 'state', t('sent')); st.setAttribute('data-state', 'sent'); li.appendChild(st); }
      addLi(li, m.created_at);
      if (mine) { marks(); return; }
      if (m.author === 'operator') typing(false);
      if (live) announcer.textContent = (m.name || t('support')) + ': ' + (m.text || fileLabel(m.file));
      if (live) emit('message', { id: m.message_id, author: m.author, name: m.name || '', text: m.text, created_at: m.created_at, file: m.file || null });
      if (live && o.sound && m.message_id > readId && (!isOpen() || document.hidden)) beep();
      unread(true);
    }

    // bubble shows a message's text and its attachment: an image inline, any other file as a
    // download link (the server serves it as one whatever it holds).
    function bubble(text, file, url) {
      var img = file && /^image\/(png|jpeg|gif|webp)$/.test(file.type);
      var b = el('div', img && !text ? 'bubble pic' : 'bubble');
      b.dir = 'auto'; // a Latin message in a right-to-left window (and the other way) keeps its order
      if (file) {
        var a = el('a', img ? '' : 'chip');
        if (!img) { a.appendChild(clip()); a.appendChild(document.createTextNode(' ' + fileName(file))); }
        if (url) { a.href = url; a.target = '_blank'; a.rel = 'noopener'; }
        if (img) { var i = el('img'); i.alt = file.name; i.src = url || ''; a.appendChild(i); } else a.setAttribute('download', file.name);
        b.appendChild(a);
      }
      if (text) b.appendChild(file ? el('span', '', text) : document.createTextNode(text));
      return b;
    }
    function fileName(f) {
      var n = f.size;
      return f.name + ' (' + (n < 1e3 ? n + ' B' : n < 1e6 ? Math.round(n / 1e3) + ' KB' : (n / 1e6).toFixed(1) + ' MB') + ')';
    }
    function fileLabel(f) { return f ? '\ud83d\udcce ' + fileName(f) : ''; }

    // "Seen" under the visitor's last message the operators have read; older states hidden.
    function marks() {
      var mine = list.querySelectorAll('li.me[data-id]'), last = mine[mine.length - 1];
      Array.prototype.forEach.call(mine, function (li) {
        var s = li.querySelector('.state');
        if (!s || s.getAttribute('data-state') !== 'sent') return;
        s.classList.toggle('old', li !== last);
        var seen = +li.getAttribute('data-id') <= seenId;
        s.textContent = seen ? t('seen') : t('sent');
        s.toggleAttribute('data-seen', seen);
      });
    }

    function typing(on, name) {
      clearTimeout(typingTimer);
      typingNote.textContent = on ? t('typing', { name: name || t('support') }) : '';
      typingNote.classList.toggle('on', !!on);
      if (on) typingTimer = setTimeout(function () { typing(false); }, 6000);
    }

    function isOpen() { return panel.classList.contains('open'); }

    // Unread: operator and system messages after the read marker. While the window is open in a
    // visible tab everything shown is read; else the launcher shows a badge and the last one.
    function unread(fresh) {
      var them = list.querySelectorAll('li.them:not(.system)[data-id]'), top = 0, n = 0, lastLi = null;
      Array.prototype.forEach.call(them, function (li) {
        var id = +li.getAttribute('data-id');
        if (id > top) top = id;
        if (id > readId) { n++; lastLi = li; }
      });
      if (isOpen() && !document.hidden && n) { markRead(top); n = 0; }
      if (n !== lastUnread) { lastUnread = n; emit('unread', n); }
      badge.textContent = n > 9 ? '9+' : String(n);
      badge.classList.toggle('on', n > 0 && !isOpen());
      var label = site.launcher_label || t('open');
      o.button.setAttribute('aria-label', isOpen() ? t('close') : n ? t('unread', { label: label, n: n }) : label);
      if (n && lastLi && !isOpen() && (fresh || !preview.classList.contains('on')) && +lastLi.getAttribute('data-id') > dismissed) {
        var who = lastLi.querySelector('.who');
        previewWho.textContent = who ? who.textContent : t('support');
        var bub = lastLi.querySelector('.bubble'), pic = bub.querySelector('img');
        previewText.textContent = bub.textContent || (pic ? '\ud83d\udcce ' + pic.alt : '');
        preview.classList.add('on');
      }
      if (!n || isOpen()) preview.classList.remove('on');
      setTitle(n);
    }

    function markRead(id) {
      if (id > readId) { readId = id; saved.read = id; save(); }
      if (readId > sentRead && ws && ws.readyState === 1 && convId) {
        sentRead = readId;
        ws.send(JSON.stringify({ type: 'seen', message_id: readId }));
      }
    }

    function setTitle(n) {
      if (ourTitle !== null && document.title !== ourTitle) { baseTitle = null; ourTitle = null; } // the page changed it
      if (n && document.hidden) {
        if (baseTitle === null) baseTitle = document.title;
        document.title = '(' + n + ') ' + baseTitle;
        ourTitle = document.title; // as the browser keeps it (whitespace collapsed)
      } else if (baseTitle !== null) {
        document.title = baseTitle; baseTitle = null; ourTitle = null;
      }
    }

    function beep() {
      try {
        var A = window.AudioContext || window.webkitAudioContext, a = new A(), g = a.createGain(), x = a.createOscillator();
        x.frequency.value = 880; g.gain.value = 0.05; x.connect(g); g.connect(a.destination);
        x.start(); x.stop(a.currentTime + 0.12); x.onended = function () { a.close(); };
      } catch (e) { /* no audio here */ }
    }

    document.addEventListener('visibilitychange', function () { unread(false); });
    window.addEventListener('storage', function (e) { // another tab read or learned something
      if (e.key !== KEY) return;
      if (e.newValue === null) { if (saved.token) shutdown(); return; } // shutdown in another tab
      try { var v = JSON.parse(e.newValue || '{}') || {}; } catch (x) { return; }
      if ((v.read || 0) > readId) { readId = v.read; unread(false); }
      if (v.token && !saved.token && !forgotten[v.token]) saved.token = v.token;
    });
    preview.addEventListener('click', function (e) {
      if (e.target === previewClose) {
        var them = list.querySelectorAll('li.them[data-id]');
        dismissed = them.length ? +them[them.length - 1].getAttribute('data-id') : 0;
        preview.classList.remove('on');
        return;
      }
      toggle(true);
    });

    function setState(p, st, why) {
      p.st = st;
      p.li.classList.toggle('failed', st === 'failed');
      var s = p.li.querySelector('.state');
      s.textContent = st === 'sending' ? t('sending') : st === 'uploading' ? t('uploading') : st === 'sent' ? t('sent') : st === 'pending' ? t('pending')
        : t('notSent') + (why ? ': ' + why : '');
      s.setAttribute('data-state', st);
      if (st === 'failed' && !p.refused) {
        var b = el('button', '', t('retry')); b.type = 'button';
        b.disabled = Date.now() < blockedUntil;
        b.onclick = function () { resend(p); };
        s.appendChild(b);
      }
    }

    // send shows the message at once and sends it; a file is uploaded first (POST
    // /v1/widget/files), then named by the message frame.
    function send(text, blob) {
      var cid = rid();
      var li = el('li', 'me'); li.setAttribute('data-client-id', cid);
      var meta = blob && { name: blob.name || 'image.png', type: blob.type, size: blob.size };
      li.appendChild(bubble(text, meta, blob && URL.createObjectURL(blob))); li.appendChild(el('span', 'state'));
      addLi(li);
      var p = { cid: cid, text: text, li: li, blob: blob };
      pending[cid] = p; order.push(cid);
      var max = (site.file_max_mb || 10) * 1e6; // MB as the server counts them
      if (blob && (site.file_max_mb < 0 || blob.size > max)) { refuse(p, t('fileTooLarge', { max: Math.max(site.file_max_mb, 0) })); return; }
      transmit(p);
    }

    // refuse marks a file that will never be taken (too large, a type refused): no retry, and
    // its name and size in place of a preview.
    function refuse(p, why) {
      p.refused = true;
      var b = p.li.querySelector('.bubble');
      p.li.replaceChild(bubble(p.text, { name: p.blob.name || 'image.png', type: '', size: p.blob.size }, null), b);
      setState(p, 'failed', why);
    }

    function upload(p) {
      setState(p, 'uploading');
      var fd = new FormData();
      fd.append('visitor', saved.token); fd.append('file', p.blob, p.blob.name || 'image.png');
      fetch(o.base + '/v1/widget/files?site=' + encodeURIComponent(o.site), { method: 'POST', body: fd, credentials: 'omit' })
        .then(function (r) {
          return r.json().then(function (b) {
            if (!r.ok) return /^file_/.test(b.code) ? refuse(p, b.message) : setState(p, 'failed', b.message);
            p.file = b.id; transmit(p);
          });
        }).catch(function () { setState(p, 'failed', t('noAnswer')); });
    }

    function transmit(p) {
      clearTimeout(p.timer);
      if (ws && ws.readyState === 1 && p.blob && !p.file) return upload(p);
      if (ws && ws.readyState === 1) {
        setState(p, 'sending');
        ws.send(JSON.stringify(p.file ? { type: 'message', client_id: p.cid, text: p.text, file: p.file } : { type: 'message', client_id: p.cid, text: p.text }));
        p.timer = setTimeout(function () { if (p.st === 'sending') setState(p, 'failed', t('noAnswer')); }, 15000);
      } else setState(p, 'pending'); // sent when the socket says hello again
    }

    function resend(p) { if (Date.now() < blockedUntil) return; transmit(p); }

    function confirm(p, id) {
      if (convStatus === 'closed') { convStatus = 'open'; rateAsk(); }
      clearTimeout(p.timer);
      seen[id] = true; p.li.setAttribute('data-id', id);
      setState(p, 'sent');
      delete pending[p.cid];
      marks();
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
        banner.textContent = sentence + ' ' + t('sendAgain', { n: left });
        banner.classList.add('on');
      };
      tick(); countdown = setInterval(tick, 250);
    }

    function handle(f) {
      switch (f.type) {
        case 'hello':
          attempt = 0; conn.textContent = ''; offline(false);
          if (saved.token !== f.visitor) { saved.token = f.visitor; save(); }
          opensAt = f.opens_at || '';
          sayPage(true);
          applySite(f.site || {}, f.status !== 'online');
          // With an identity, the conversation to show is the one identified answers with.
          if (identity) { heldHello = f; ws.send(JSON.stringify(identity)); } else adopt(f);
          order = order.filter(function (c) { return pending[c]; });
          order.forEach(function (c) { if (pending[c].st !== 'failed') transmit(pending[c]); });
          break;
        case 'ack':
          convId = f.conversation_id; showEmail();
          if (saved.conv !== convId) { saved.conv = convId; save(); }
          if (pending[f.client_id]) confirm(pending[f.client_id], f.message_id); else seen[f.message_id] = true;
          break;
        case 'message':
          if (f.message_id > lastId) lastId = f.message_id;
          if (seen[f.message_id]) return;
          if (f.client_id && pending[f.client_id]) { confirm(pending[f.client_id], f.message_id); return; }
          seen[f.message_id] = true;
          render(f, f.message_id > lastHello);
          break;
        case 'typing':
          typing(true, f.name);
          break;
        case 'conversation':
          convStatus = f.status; rateAsk();
          break;
        case 'presence': // the operators came or went (or the office hours began or ended)
          opensAt = f.opens_at || ''; applySite(site, f.status !== 'online');
          break;
        case 'rated':
          rating = f.rating; rateAsk();
          break;
        case 'transcript_sent': // stored: the email is on its way, not yet sent
          transcriptTo = f.email; transcriptState = 'queued'; rateAsk();
          break;
        case 'transcript_delivery': // delivered, or failed for good
          if (transcriptTo) { transcriptState = f.status; rateAsk(); }
          break;
        case 'identified':
          heldHello = null; adopt(f);
          break;
        case 'seen':
          if (f.message_id > seenId) { seenId = f.message_id; marks(); }
          break;
        case 'email_saved':
          saved.email = f.email; hasEmail = true; save(); emailBox.classList.remove('on');
          emailOk.textContent = t('emailThanks', { email: f.email }); emailOk.classList.add('on');
          break;
        case 'error':
          var p = f.client_id && pending[f.client_id];
          if (f.code === 'rate_limited' || f.code === 'braked') {
            block(f.retry_after_ms || 3000, f.code === 'braked' ? t('braked') : t('tooFast'));
          }
          if (p && f.code === 'unavailable' && (p.tries = (p.tries || 0) + 1) <= 5) {
            // The server could not take it for a moment: send it again by itself, later each time.
            clearTimeout(p.timer);
            p.timer = setTimeout(function () { if (p.st === 'sending') transmit(p); }, Math.max(f.retry_after_ms || 1000, 500) * p.tries);
            break;
          }
          if (f.code === 'unverified') {
            console.warn('spookat: identify refused: ' + f.message);
            if (heldHello) { adopt(heldHello); heldHello = null; } // this browser's own conversation, then
            break;
          }
          if (p && f.code === 'plan_limit') p.refused = true; // not this month: no Retry
          if (p) setState(p, 'failed', f.code === 'too_large' ? t('tooLarge') : f.code === 'plan_limit' ? t('planLimit') : f.message);
          else if (f.code !== 'rate_limited' && f.code !== 'braked') { banner.textContent = f.message; banner.classList.add('on'); }
          break;
      }
    }

    // While away, the window asks for an email: after the first message (default), before it,
    // or never (the site's ask_email). An email typed before the first message is saved with it.
    // adopt takes the conversation a hello or an identified names: its markers and state, then
    // its history after what is shown (all of it when it is another conversation than shown).
    function adopt(f) {
      if (convId && f.conversation_id !== convId) {
        Array.prototype.slice.call(list.children).forEach(function (li) { if (li !== empty && li !== rateCard) list.removeChild(li); });
        if (!empty.parentNode) list.appendChild(empty);
        seen = {}; lastId = 0; lastHello = 0; lastDay = ''; readId = 0; sentRead = 0; seenId = 0;
      }
      convId = f.conversation_id;
      lastHello = Math.max(lastHello, f.last_message_id || 0);
      if ((f.read_message_id || 0) > readId) { readId = f.read_message_id; saved.read = readId; }
      sentRead = Math.max(sentRead, f.read_message_id || 0);
      if (f.seen_message_id > seenId) seenId = f.seen_message_id;
      if (convId && saved.conv !== convId) { saved.conv = convId; save(); }
      convStatus = f.conversation_status || ''; rating = f.rating || ''; hasEmail = !!f.has_email;
      applySite(site, away); rateAsk();
      if (convId) {
        showEmail();
        ws.send(JSON.stringify({ type: 'resume', after_message_id: lastId }));
        markRead(readId); // a marker moved while offline (or in another tab) reaches the server
      }
    }

    function showEmail() {
      var ask = site.ask_email || 'after';
      emailBox.classList.toggle('on', away && !saved.email && !hasEmail && !(identity && identity.email) && ask !== 'never' && (!!convId || ask === 'before'));
      if (convId && emailInput.value.trim() && !saved.email && ws && ws.readyState === 1 && emailBox.getAttribute('data-early')) {
        emailBox.removeAttribute('data-early');
        ws.send(JSON.stringify({ type: 'email', email: emailInput.value.trim() }));
      }
    }

    function applySite(w, isAway) {
      site = w; away = isAway;
      pickLang(); relabel();
      sub.textContent = away ? (opensAt ? t('backAt', { when: when(Date.parse(opensAt)) }) : t('away')) : t('online');
      sub.classList.toggle('online', !away);
      var note = away ? (w.away_message || t('awayMessage')) : (w.reply_time || t('replyTime'));
      if (w.greeting && !convId) {
        empty.className = 'them greet'; clear(empty);
        empty.appendChild(el('span', 'who', w.title || t('support'))); empty.appendChild(el('div', 'bubble', w.greeting));
        empty.appendChild(el('span', 'state', note));
      } else if (empty.className === 'empty') empty.textContent = note;
      // The window takes the site's accent; the launcher's colour and corner come from the embed
      // (data-color, data-position: drawn before any request), and the window opens by the launcher.
      var a = /^#[0-9a-fA-F]{6}$/.test(w.accent || '') ? w.accent : o.color;
      o.root.host.style.setProperty('--a', a || '#4f46e5');
      if (a) o.button.style.background = a; // the embed's colour drew it; the site's current one wins
      showEmail(); unread(false);
    }
    function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }

    // A closed conversation asks for a rating (good or bad, and a comment), once.
    function rateAsk() {
      if (rateCard) { rateCard.parentNode && list.removeChild(rateCard); rateCard = null; }
      if (convStatus !== 'closed' || !convId) return;
      rateCard = el('li', 'them rate');
      if (rating) { rateCard.appendChild(el('div', 'bubble', t('rated'))); transcriptOffer(rateCard); list.appendChild(rateCard); scroll(); return; }
      var box = el('div', 'bubble'), row = el('div', 'rrow'), note = el('textarea'), go = el('button', 'rsend', t('rate')), pick = '';
      box.appendChild(el('p', '', t('closedAsk')));
      [['good', '\ud83d\udc4d'], ['bad', '\ud83d\udc4e']].forEach(function (r) {
        var b = el('button', 'rbtn', r[1] + ' ' + t(r[0])); b.type = 'button'; b.setAttribute('aria-pressed', 'false'); b.setAttribute('data-rating', r[0]);
        b.onclick = function () { pick = r[0]; Array.prototype.forEach.call(row.children, function (x) { x.setAttribute('aria-pressed', x === b ? 'true' : 'false'); }); go.disabled = false; };
        row.appendChild(b);
      });
      note.rows = 2; note.maxLength = 500; note.setAttribute('aria-label', t('comment')); note.placeholder = t('comment');
      go.type = 'button'; go.disabled = true;
      go.onclick = function () { if (pick && ws && ws.readyState === 1) ws.send(JSON.stringify({ type: 'rate', rating: pick, comment: note.value })); };
      box.appendChild(row); box.appendChild(note); box.appendChild(go); transcriptOffer(box);
      rateCard.appendChild(box); list.appendChild(rateCard); scroll();
    }
    // A closed conversation can be had by email when the visitor left an address.
    var transcriptTo = '', transcriptState = '';
    function transcriptOffer(box) {
      if (!saved.email && !(identity && identity.email) && !hasEmail) return;
      if (transcriptTo && transcriptState !== 'failed') {
        box.appendChild(el('p', 'txok', t(transcriptState === 'delivered' ? 'transcriptSent' : 'transcriptQueued', { email: transcriptTo })));
        return;
      }
      if (transcriptState === 'failed') box.appendChild(el('p', 'txfail', t('transcriptFailed', { email: transcriptTo })));
      var b = el('button', 'rbtn tx', t('transcript')); b.type = 'button';
      b.onclick = function () { if (ws && ws.readyState === 1) { b.disabled = true; ws.send(JSON.stringify({ type: 'transcript' })); } };
      box.appendChild(b);
    }

    function connect() {
      clearTimeout(retryTimer);
      if (dead || ws && ws.readyState < 2) return;
      var u = o.base.replace(/^http/, 'ws') + '/v1/widget/ws?site=' + encodeURIComponent(o.site) +
        (saved.token ? '&visitor=' + encodeURIComponent(saved.token) : '');
      var s, up = false;
      try { s = new WebSocket(u); } catch (e) { return probe(); }
      ws = s;
      s.onopen = function () { up = true; };
      s.onmessage = function (e) { if (ws !== s) return; var f; try { f = JSON.parse(e.data); } catch (x) { return; } handle(f); };
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
            conn.textContent = t('reconnecting');
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
      conn.textContent = offlineNote.classList.contains('on') ? t('offlineShort') : t('reconnecting');
      retryTimer = setTimeout(connect, ms);
    }

    window.addEventListener('online', function () { attempt = 0; connect(); });

    // The page the visitor is on, for the operators: said after each hello and when the page
    // changes (a single-page site changes it without a load: checked every 2 s).
    var pageSaid = '';
    function sayPage(again) {
      var k = location.href + '\n' + document.title;
      if (!ws || ws.readyState !== 1 || (k === pageSaid && !again)) return;
      pageSaid = k;
      // Only what the server takes (schema/PROTOCOL.md, "page"): a refusal would be the visitor's to read.
      var ref = /^https?:\/\//.test(document.referrer) ? document.referrer.slice(0, 2048) : '';
      var lang = /^[A-Za-z0-9-]{1,35}$/.test(navigator.language) ? navigator.language : '', tz = '';
      try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (x) { /* no Intl: no zone */ }
      var f = { type: 'page', url: location.href.slice(0, 2048), title: document.title.slice(0, 200), referrer: ref, language: lang,
        time_zone: /^[A-Za-z0-9_+\/-]{1,64}$/.test(tz) ? tz : '' };
      ws.send(JSON.stringify(f));
    }
    setInterval(sayPage, 2000);
    window.addEventListener('popstate', function () { sayPage(); });
    window.addEventListener('hashchange', function () { sayPage(); });

    form.addEventListener('submit', function (e) {
      e.preventDefault();
      var t = input.value;
      if (!t.trim()) return;
      input.value = ''; grow();
      typedAt = 0;
      if (emailBox.classList.contains('on') && !convId && emailInput.value.trim()) emailBox.setAttribute('data-early', '1');
      send(t);
    });
    attachBtn.addEventListener('click', function () { picker.click(); });
    picker.addEventListener('change', function () { if (picker.files[0]) send('', picker.files[0]); picker.value = ''; });
    // A pasted screenshot is sent as it is (the text box keeps what was typed).
    input.addEventListener('paste', function (e) {
      var items = (e.clipboardData && e.clipboardData.files) || [];
      if (!items.length) return;
      e.preventDefault(); send('', items[0]);
    });
    // The box grows with what is typed, never with its placeholder (a long one is cut, not wrapped).
    function grow() {
      input.style.height = 'auto';
      if (input.value) input.style.height = Math.min(input.scrollHeight + 2, 120) + 'px';
    }
    input.addEventListener('input', grow);
    // Focus stays in the window while it is open: Tab from the last control goes to the first.
    panel.addEventListener('keydown', function (e) {
      if (e.key !== 'Tab') return;
      var all = Array.prototype.filter.call(panel.querySelectorAll('button,textarea,input'), function (x) { return !x.disabled && x.offsetParent !== null; });
      if (!all.length) return;
      var first = all[0], last = all[all.length - 1], at = o.root.activeElement;
      if (e.shiftKey && at === first) { e.preventDefault(); last.focus(); } else if (!e.shiftKey && at === last) { e.preventDefault(); first.focus(); }
    });
    input.addEventListener('input', function () {
      if (!input.value.trim() || !convId || !ws || ws.readyState !== 1 || Date.now() - typedAt < 3000) return;
      typedAt = Date.now();
      ws.send(JSON.stringify({ type: 'typing' }));
    });
    input.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); form.requestSubmit ? form.requestSubmit() : sendBtn.click(); }
    });
    emailForm.addEventListener('submit', function (e) {
      e.preventDefault();
      var v = emailInput.value.trim();
      if (v && !convId) { // nothing stored yet: the email goes with the first message
        emailBox.setAttribute('data-early', '1');
        emailOk.textContent = t('emailEarly', { email: v }); emailOk.classList.add('on');
        input.focus();
        return;
      }
      if (!v || !ws || ws.readyState !== 1) return;
      ws.send(JSON.stringify({ type: 'email', email: v }));
    });

    // While the window is open the launcher shows a close mark, as people expect of it.
    var launcherIcon = o.button.querySelector('path'), chatIcon = launcherIcon && launcherIcon.getAttribute('d');
    var CLOSE_ICON = 'M6.4 5L12 10.6 17.6 5 19 6.4 13.4 12 19 17.6 17.6 19 12 13.4 6.4 19 5 17.6 10.6 12 5 6.4z';
    function toggle(open) {
      var on = open == null ? !panel.classList.contains('open') : open;
      panel.classList.toggle('open', on);
      if (launcherIcon) launcherIcon.setAttribute('d', on ? CLOSE_ICON : chatIcon);
      o.button.setAttribute('aria-expanded', on ? 'true' : 'false');
      if (on) { connect(); scroll(); input.focus(); }
      if (on !== wasOpen) { wasOpen = on; emit(on ? 'open' : 'close'); }
      unread(false);
    }
    var wasOpen = false;
    closeBtn.addEventListener('click', function () { toggle(false); o.button.focus(); });
    panel.addEventListener('keydown', function (e) { if (e.key === 'Escape') { toggle(false); o.button.focus(); } });

    connect(); // on intent: the history is there by the time the window opens
    // The host page's API (widget.js queues the calls made before this loads).
    function call(c, v) {
      if (c === 'open') toggle(true);
      else if (c === 'close') toggle(false);
      else if (c === 'send') { if (typeof v === 'string' && v.trim()) send(v); }
      else if (c === 'shutdown') shutdown();
      else if (c === 'identify') {
        if (!v || typeof v.user_id !== 'string' && typeof v.user_id !== 'number') { console.warn('spookat: identify needs {user_id, user_hash, email, name}'); return; }
        identity = { type: 'identify', user_id: String(v.user_id), email: v.email || '', name: v.name || '', user_hash: v.user_hash || '' };
        showEmail(); // the page gave the email: never ask for it
        if (ws && ws.readyState === 1) ws.send(JSON.stringify(identity)); // else after the next hello
      }
      else console.warn('spookat: unknown command ' + c + ': use open, close, send, on or shutdown');
    }
    // shutdown forgets the visitor (a logout on the host page): a new token and an empty window.
    function shutdown() {
      if (saved.token) forgotten[saved.token] = true;
      saved = {}; try { localStorage.removeItem(KEY); } catch (e) { /* private mode */ }
      var s = ws; ws = null; if (s) s.close();
      clearTimeout(retryTimer); toggle(false);
      Array.prototype.slice.call(list.children).forEach(function (li) { if (li !== empty) list.removeChild(li); });
      if (!empty.parentNode) list.appendChild(empty);
      identity = null;
      seen = {}; pending = {}; order = []; transcriptTo = ''; transcriptState = ''; hasEmail = false; lastId = 0; lastHello = 0; convId = null; readId = 0; sentRead = 0; seenId = 0; lastDay = '';
      emailBox.classList.remove('on'); emailOk.classList.remove('on'); applySite(site, away);
    }
    return { toggle: toggle, call: call, _ws: function () { return ws; } };
  };
})();
